// Copyright (c) fencedkv authors.
//
// fencedkv-lock: run a command while holding a lease from fencedkv-server's
// built-in lease service, with its fencing token in the environment -- the
// model is `etcdctl lock NAME -- CMD` (which exports ETCD_LOCK_REV).
//
//   fencedkv-lock [--server host:port] [--ttl_ms N] [--holder ID]
//                 [--fence_advance KEY] [--wait_ms N] NAME -- CMD [ARGS...]
//   fencedkv-lock [flags] --hold NAME
//
// 1. Acquires lease NAME (waiting while another holder has it, up to
//    --wait_ms; -1 waits forever).
// 2. If --fence_advance KEY: FENCE.ADVANCE KEY token, so holders of older
//    tokens are fenced out before CMD writes anything.
// 3. Runs CMD in a process group of its own, with FENCEDKV_TOKEN,
//    FENCEDKV_HOLDER and FENCEDKV_LEASE set, renewing the lease every ttl/3.
//    (This process is a child subreaper: what CMD leaves behind stays its
//    child, in that group.)
// 4. If a renewal is refused (the lease was lost: this process was paused,
//    the network failed) it sends the whole group SIGTERM (SIGKILL after
//    --kill_grace_ms) and exits 3. CMD's writes with the old token are
//    refused by the store anyway -- this only stops it early.
// 5. When CMD ends, stops what is left of its group the same way (nothing
//    it started may outlive the lease), releases the lease and exits with
//    CMD's status (128+N if it died of signal N).
// SIGINT / SIGTERM to fencedkv-lock are passed to CMD's group.
//
// --hold: no command. Prints the token on stdout, renews until SIGINT or
// SIGTERM (then releases and exits 0) or until the lease is lost (exit 3).
//
// Exit codes: CMD's status; 2 usage error; 3 lease lost; 4 lease not
// acquired within --wait_ms; 5 server unreachable or refusing.

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fencedkv/version.h"

#include "resp_client.h"
#include "util/help_flags.h"

DEFINE_string(server, "127.0.0.1:7379", "fencedkv-server address, host:port");
DEFINE_int64(ttl_ms, 10000,
             "Lease TTL in ms; renewed every ttl/3 while CMD runs");
DEFINE_string(holder, "", "Holder ID; default <hostname>:<pid>");
DEFINE_string(fence_advance, "",
              "If set, FENCE.ADVANCE this key (or {tag}) to "
              "the new token before CMD starts");
DEFINE_int64(wait_ms, -1,
             "How long to wait for a lease held by someone else; "
             "-1 = forever, 0 = fail at once");
DEFINE_string(user, "",
              "ACL user to AUTH as (with --password); default: the "
              "default user");
DEFINE_string(password, "",
              "AUTH password, if the server needs one. Visible "
              "in ps: prefer the REDISCLI_AUTH environment variable (also "
              "read by redis-cli)");
DEFINE_bool(hold, false,
            "No command: print the token, hold the lease until "
            "SIGINT/SIGTERM (exit 0, released) or until it is lost (exit 3)");
DEFINE_int64(kill_grace_ms, 2000,
             "When stopping CMD's process group: how long "
             "after SIGTERM before SIGKILL");

namespace {

using fencedkv::tools::Reply;
using fencedkv::tools::RespClient;

constexpr int kExitUsage = 2;
constexpr int kExitLeaseLost = 3;
constexpr int kExitNotAcquired = 4;
constexpr int kExitServer = 5;

volatile sig_atomic_t g_group = 0;   // CMD's process group, once it runs
volatile sig_atomic_t g_signal = 0;  // SIGINT / SIGTERM received

void OnSignal(int sig) {
  g_signal = sig;
  if (g_group > 0) kill(-g_group, sig);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Password() {
  if (!FLAGS_password.empty()) return FLAGS_password;
  const char* env = std::getenv("REDISCLI_AUTH");
  return env != nullptr ? env : "";
}

// Calls the server, reconnecting once if the connection dropped.
bool Call(RespClient* c, const std::vector<std::string>& args, Reply* r,
          std::string* error) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!c->connected()) {
      if (!c->Connect(FLAGS_server, 2000, error)) continue;
      const std::string password = Password();
      if (!password.empty()) {
        std::vector<std::string> auth = {"AUTH"};
        if (!FLAGS_user.empty()) auth.push_back(FLAGS_user);
        auth.push_back(password);
        Reply reply;
        if (!c->Call(auth, &reply, error)) continue;
        if (reply.type == Reply::kError) {
          *error = reply.str;
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

// Reaps every exited child (this process is a subreaper: CMD's orphans are
// its children too); stores CMD's status in *status when it goes. True once
// CMD is gone.
bool Reap(pid_t cmd, bool* cmd_done, int* status) {
  int st = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
    if (pid == cmd) {
      *cmd_done = true;
      *status = st;
    }
  }
  return *cmd_done;
}

// True while a process of `group` is left.
bool GroupAlive(pid_t group) { return kill(-group, 0) == 0 || errno != ESRCH; }

// Stops every process of CMD's group: SIGTERM, then SIGKILL after
// --kill_grace_ms; reaps them (and CMD, into *status).
void StopGroup(pid_t group, pid_t cmd, bool* cmd_done, int* status) {
  Reap(cmd, cmd_done, status);
  if (!GroupAlive(group)) return;
  kill(-group, SIGTERM);
  const int64_t kill_at = NowMs() + FLAGS_kill_grace_ms;
  while (true) {
    Reap(cmd, cmd_done, status);
    if (!GroupAlive(group)) return;
    if (NowMs() >= kill_at) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(-group, SIGKILL);
  for (int i = 0; i < 500 && GroupAlive(group); ++i) {
    Reap(cmd, cmd_done, status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Reap(cmd, cmd_done, status);
}

// Renews the lease every ttl/3 while `keep_going` says so; false once it is
// lost (a renewal refused, or the server unreachable past the TTL).
template <typename KeepGoing>
bool HoldWhile(RespClient* client, const std::string& name,
               const std::string& holder, const std::string& token,
               KeepGoing keep_going) {
  const std::string ttl = std::to_string(FLAGS_ttl_ms);
  const int64_t every = std::max<int64_t>(10, FLAGS_ttl_ms / 3);
  int64_t next_renew = NowMs() + every;
  int64_t expires = NowMs() + FLAGS_ttl_ms;
  Reply r;
  std::string error;
  while (keep_going()) {
    const int64_t now = NowMs();
    if (now >= next_renew) {
      if (Call(client, {"LEASE.RENEW", name, holder, token, ttl}, &r, &error)) {
        if (r.type != Reply::kArray) {
          Log("lease %s lost: %s", name, r.str);
          return false;
        }
        expires = now + FLAGS_ttl_ms;
        next_renew = now + every;
      } else if (now >= expires) {
        Log("lease %s lost: server unreachable past the TTL (%s)", name, error);
        return false;
      } else {
        next_renew = now + 50;  // retry soon, while the lease may still hold
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void Release(RespClient* client, const std::string& name,
             const std::string& holder, const std::string& token) {
  Reply r;
  std::string error;
  if (Call(client, {"LEASE.RELEASE", name, holder, token}, &r, &error) &&
      r.type == Reply::kError) {
    Log("LEASE.RELEASE %s: %s", name, r.str);
  }
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "run a command while holding a fencedkv lease\n"
      "  fencedkv-lock [flags] NAME -- CMD [ARGS...]\n"
      "  fencedkv-lock [flags] --hold NAME\n"
      "CMD gets FENCEDKV_TOKEN (its fencing token), FENCEDKV_HOLDER and "
      "FENCEDKV_LEASE; it runs in a process group of its own, stopped whole "
      "when the lease is lost or CMD ends.\nExit: CMD's status; 2 usage; 3 "
      "lease lost; 4 not acquired in --wait_ms; 5 server error.");
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
  if (names.size() != 1 || cmd.empty() == !FLAGS_hold) {
    std::fprintf(stderr,
                 "usage: fencedkv-lock [flags] NAME -- CMD [ARGS...] | "
                 "fencedkv-lock [flags] --hold NAME (see --help)\n");
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
  const int64_t give_up =
      FLAGS_wait_ms < 0 ? INT64_MAX : NowMs() + FLAGS_wait_ms;
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
  // 2. Fence out older holders before anything is written.
  if (!FLAGS_fence_advance.empty()) {
    if (!Call(&client, {"FENCE.ADVANCE", FLAGS_fence_advance, token}, &r,
              &error) ||
        r.type != Reply::kBulk) {
      Log("FENCE.ADVANCE %s failed: %s", FLAGS_fence_advance,
          r.type == Reply::kError ? r.str : error);
      Release(&client, name, holder, token);
      return kExitServer;
    }
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);

  if (FLAGS_hold) {
    std::printf("%s\n", token.c_str());
    std::fflush(stdout);
    if (!HoldWhile(&client, name, holder, token,
                   [] { return g_signal == 0; })) {
      return kExitLeaseLost;
    }
    Release(&client, name, holder, token);
    return 0;
  }

  // 3. Run CMD in a group of its own, with the token, renewing.
  prctl(PR_SET_CHILD_SUBREAPER, 1);  // its orphans stay ours, to stop
  const pid_t child = fork();
  if (child < 0) {
    Log("fork: %s", std::strerror(errno));
    Release(&client, name, holder, token);
    return kExitServer;
  }
  if (child == 0) {
    setpgid(0, 0);
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
  setpgid(child, child);  // as the child does: whichever runs first
  g_group = child;
  if (g_signal != 0) kill(-child, g_signal);  // came before g_group was set
  int status = 0;
  bool done = false;
  const bool held = HoldWhile(&client, name, holder, token,
                              [&] { return !Reap(child, &done, &status); });
  if (!held)
    Log("stopping the command (process group %s)", std::to_string(child));
  // 4-5. Nothing of CMD's group outlives the lease.
  StopGroup(child, child, &done, &status);
  g_group = 0;
  if (!held) return kExitLeaseLost;
  Release(&client, name, holder, token);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}
