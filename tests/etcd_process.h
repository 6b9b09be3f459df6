// Copyright (c) fencedkv authors.
//
// A one-member etcd (Debian's etcd-server) as a child process of a test:
// loopback client and peer URLs on free ports, its own data directory,
// stopped by PID (the destructor kills it).
//
// Not thread-safe.

#ifndef FENCEDKV_TESTS_ETCD_PROCESS_H_
#define FENCEDKV_TESTS_ETCD_PROCESS_H_

#include <string>

#include <sys/types.h>

namespace fencedkv {
namespace test {

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

class EtcdProcess {
 public:
  EtcdProcess() = default;
  ~EtcdProcess() { Kill9(); }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Starts etcd with its data in `dir` (created if missing) and waits until
  // it answers (at most 20 s). False if etcd is not installed or did not
  // come up. A restart after Stop/Kill9 keeps the data and the port.
  bool Start(const std::string& dir);
  void Stop();  // SIGTERM, then SIGKILL after 5 s
  void Kill9();
  void Pause();  // SIGSTOP: etcd stops answering, connections stay open
  void Resume();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // "http://127.0.0.1:PORT"
  std::string endpoint() const;
  int client_port() const { return client_port_; }

 private:
  pid_t pid_ = -1;
  int client_port_ = 0;
  int peer_port_ = 0;
  std::string dir_;
};

}  // namespace test
}  // namespace fencedkv

#endif  // FENCEDKV_TESTS_ETCD_PROCESS_H_
