// Copyright (c) fencedkv authors.
//
// fencedkv-lock: run a command while holding a lease from fencedkv-server's
// built-in lease service, with its fencing token in the environment -- the
// model is `etcdctl lock NAME -- CMD` (which exports ETCD_LOCK_REV).
//
//   fencedkv-lock [--server host:port] [--ttl_ms N] [--holder ID]
//                 [--fence_advance KEY] [--wait_ms N] NAME -- CMD [ARGS...]
//
// 1. Acquires lease NAME (waiting while another holder has it, up to
//    --wait_ms; -1 waits forever).
// 2. If --fence_advance KEY: FENCE.ADVANCE KEY token, so holders of older
//    tokens are fenced out before CMD writes anything.
// 3. Runs CMD with FENCEDKV_TOKEN, FENCEDKV_HOLDER and FENCEDKV_LEASE set,
//    renewing the lease every ttl/3.
// 4. If a renewal is refused (the lease was lost: this process was paused,
//    the network failed) it sends CMD SIGTERM (SIGKILL 2 s later) and exits
//    3. CMD's writes with the old token are refused by the store anyway --
//    this only stops it early.
// 5. When CMD ends, releases the lease and exits with CMD's status (128+N if
//    it died of signal N).
// Exit codes: CMD's status; 2 usage error; 3 lease lost; 4 lease not
// acquired within --wait_ms; 5 server unreachable or refusing.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>

#include "fencedkv/version.h"
#include "util/help_flags.h"
#include "resp_client.h"

DEFINE_string(server, "127.0.0.1:7379", "fencedkv-server address, host:port");
DEFINE_int64(ttl_ms, 10000, "Lease TTL in ms; renewed every ttl/3 while CMD runs");
DEFINE_string(holder, "", "Holder ID; default <hostname>:<pid>");
DEFINE_string(fence_advance, "", "If set, FENCE.ADVANCE this key (or {tag}) to "
              "the new token before CMD starts");
DEFINE_int64(wait_ms, -1, "How long to wait for a lease held by someone else; "
             "-1 = forever, 0 = fail at once");
DEFINE_string(password, "", "AUTH password, if the server has --requirepass");

namespace {

using fencedkv::tools::Reply;
using fencedkv::tools::RespClient;

constexpr int kExitUsage = 2;
constexpr int kExitLeaseLost = 3;
constexpr int kExitNotAcquired = 4;
constexpr int kExitServer = 5;

volatile sig_atomic_t g_child = 0;

void Forward(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Calls the server, reconnecting once if the connection dropped.
bool Call(RespClient* c, const std::vector<std::string>& args, Reply* r,
          std::string* error) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!c->connected()) {
      if (!c->Connect(FLAGS_server, 2000, error)) continue;
      if (!FLAGS_password.empty()) {
        Reply auth;
        if (!c->Call({"AUTH", FLAGS_password}, &auth, error)) continue;
        if (auth.type == Reply::kError) {
          *error = auth.str;
          return false;
        }
      }
    }
    if (c->Call(args, r, error)) return true;
  }
  return false;
}

void Log(const char* fmt, const std::string& a, const std::string& b = "") {
  std::fprintf(stderr, "fencedkv-lock: ");
  std::fprintf(stderr, fmt, a.c_str(), b.c_str());
  std::fprintf(stderr, "\n");
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "run a command while holding a fencedkv lease\n"
      "  fencedkv-lock [flags] NAME -- CMD [ARGS...]\n"
      "CMD gets FENCEDKV_TOKEN (its fencing token), FENCEDKV_HOLDER and "
      "FENCEDKV_LEASE.\nExit: CMD's status; 2 usage; 3 lease lost; 4 not "
      "acquired in --wait_ms; 5 server error.");
  gflags::SetVersionString(FENCEDKV_VERSION_STRING);
  fencedkv::NarrowHelpToModule(argc, argv, "fencedkv_lock");
  // Split at the first "--" ourselves: gflags would reorder what follows it.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }
  }
  std::vector<std::string> cmd(argv + std::min(split + 1, argc), argv + argc);
  int flag_argc = split;
  gflags::ParseCommandLineFlags(&flag_argc, &argv, true);
  std::vector<std::string> names(argv + 1, argv + flag_argc);
  if (names.size() != 1 || cmd.empty()) {
    std::fprintf(stderr, "usage: fencedkv-lock [flags] NAME -- CMD [ARGS...] (see --help)\n");
    return kExitUsage;
  }
  if (FLAGS_ttl_ms < 30) {
    std::fprintf(stderr, "Invalid value for --ttl_ms: %lld (must be >= 30)\n",
                 static_cast<long long>(FLAGS_ttl_ms));
    return kExitUsage;
  }
  const std::string name = names[0];
  std::string holder = FLAGS_holder;
  if (holder.empty()) {
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    holder = std::string(host) + ":" + std::to_string(getpid());
  }
  const std::string ttl = std::to_string(FLAGS_ttl_ms);

  RespClient client;
  std::string error;
  Reply r;
  // 1. Acquire, waiting while someone else holds the lease.
  const int64_t give_up = FLAGS_wait_ms < 0 ? INT64_MAX : NowMs() + FLAGS_wait_ms;
  std::string token;
  while (true) {
    if (!Call(&client, {"LEASE.ACQUIRE", name, holder, ttl}, &r, &error)) {
      Log("cannot reach %s: %s", FLAGS_server, error);
      return kExitServer;
    }
    if (r.type == Reply::kArray && r.elements.size() == 2) {
      token = r.elements[0].str;
      break;
    }
    if (r.type != Reply::kError || r.str.rfind("LEASED", 0) != 0) {
      Log("LEASE.ACQUIRE %s: %s", name, r.str);
      return kExitServer;
    }
    if (NowMs() >= give_up) {
      Log("lease %s not acquired: %s", name, r.str);
      return kExitNotAcquired;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::min<int64_t>(200, std::max<int64_t>(10, FLAGS_ttl_ms / 10))));
  }
  // 2. Fence out older holders before CMD writes anything.
  if (!FLAGS_fence_advance.empty()) {
    if (!Call(&client, {"FENCE.ADVANCE", FLAGS_fence_advance, token}, &r,
              &error) ||
        r.type != Reply::kBulk) {
      Log("FENCE.ADVANCE %s failed: %s", FLAGS_fence_advance,
          r.type == Reply::kError ? r.str : error);
      Call(&client, {"LEASE.RELEASE", name, holder, token}, &r, &error);
      return kExitServer;
    }
  }
  // 3. Run CMD with the token, renewing.
  signal(SIGINT, Forward);
  signal(SIGTERM, Forward);
  const pid_t child = fork();
  if (child < 0) {
    Log("fork: %s", std::strerror(errno));
    return kExitServer;
  }
  if (child == 0) {
    setenv("FENCEDKV_TOKEN", token.c_str(), 1);
    setenv("FENCEDKV_HOLDER", holder.c_str(), 1);
    setenv("FENCEDKV_LEASE", name.c_str(), 1);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    std::vector<char*> args;
    for (auto& a : cmd) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "fencedkv-lock: cannot run %s: %s\n", args[0],
                 std::strerror(errno));
    _exit(127);
  }
  g_child = child;
  const int64_t every = std::max<int64_t>(10, FLAGS_ttl_ms / 3);
  int64_t next_renew = NowMs() + every;
  int64_t expires = NowMs() + FLAGS_ttl_ms;
  int status = 0;
  bool lost = false;
  while (true) {
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) break;
    const int64_t now = NowMs();
    if (!lost && now >= next_renew) {
      if (Call(&client, {"LEASE.RENEW", name, holder, token, ttl}, &r, &error)) {
        if (r.type == Reply::kArray) {
          expires = now + FLAGS_ttl_ms;
          next_renew = now + every;
        } else {
          Log("lease %s lost: %s; stopping the command", name, r.str);
          lost = true;
        }
      } else if (now >= expires) {
        Log("lease %s lost: server unreachable past the TTL (%s); stopping the command",
            name, error);
        lost = true;
      } else {
        next_renew = now + 50;  // retry soon, while the lease may still hold
      }
      if (lost) {
        kill(child, SIGTERM);
        const int64_t kill_at = NowMs() + 2000;
        while (waitpid(child, &status, WNOHANG) != child) {
          if (NowMs() >= kill_at) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  g_child = 0;
  if (lost) return kExitLeaseLost;
  // 5. Release and pass CMD's status on.
  if (Call(&client, {"LEASE.RELEASE", name, holder, token}, &r, &error) &&
      r.type == Reply::kError) {
    Log("LEASE.RELEASE %s: %s", name, r.str);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}
