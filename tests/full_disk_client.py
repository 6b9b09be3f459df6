#!/usr/bin/python3
# The client of full_disk_test.sh (Debian's python3-redis). It writes
# unique keys with pipelined plain SETs (the server's group-commit path) and
# records every write the server acknowledged, one "key value" line each.
#
#   full_disk_client.py prefill PORT ACKS
#     2000 acknowledged writes, before the load starts.
#   full_disk_client.py fill PORT ACKS BENCH_PID FILLER
#     writes until the disk is full (the server answers every SET of 30
#     pipelines in a row with an error); checks the errors are -IOERR lines,
#     that reads and PING still work; stops redis-benchmark (BENCH_PID),
#     deletes FILLER to free space, and writes until SETs are accepted again,
#     then 2000 more. Prints figures; exits 3 if writes are still refused
#     30 s after space was freed, 1 on another failed check.
#   full_disk_client.py verify PORT ACKS
#     every acknowledged write is there, with its value; a new one is taken.
import os
import signal
import sys
import time

import redis

PIPELINE = 16
VALUE_PAD = "x" * 400


def die(msg, code=1):
    print("FAIL " + msg, flush=True)
    sys.exit(code)


def write_batch(r, start, acks, errors, prefix="f"):
    """Pipelines PIPELINE SETs of keys start.. ; returns (acked, failed)."""
    pipe = r.pipeline(transaction=False)
    keys = []
    for i in range(start, start + PIPELINE):
        key = "ack:%s:%d" % (prefix, i)
        value = "v%d-%s" % (i, VALUE_PAD)
        keys.append((key, value))
        pipe.execute_command("SET", key, value, "FENCE", 1)
    replies = pipe.execute(raise_on_error=False)
    acked = failed = 0
    for (key, value), reply in zip(keys, replies):
        if reply is True or reply == b"OK" or reply == "OK":
            acks.write("%s %s\n" % (key, value))
            acked += 1
        else:
            failed += 1
            errors.append(str(reply))
    acks.flush()
    return acked, failed


def prefill(port, ack_path):
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
    errors = []
    with open(ack_path, "w") as acks:
        for start in range(0, 2000, PIPELINE):
            _, failed = write_batch(r, start, acks, errors, prefix="p")
            if failed:
                die("a write refused before the disk filled: %s" % errors[0])


def fill(port, ack_path, bench_pid, filler):
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
    next_key = 0
    acked_before = 0
    errors = []
    streak = 0
    deadline = time.time() + 120
    with open(ack_path, "a") as acks:
        while streak < 30:
            if time.time() > deadline:
                die("the disk never filled up in 120 s (%d writes acknowledged)"
                    % acked_before)
            acked, failed = write_batch(r, next_key, acks, errors)
            next_key += PIPELINE
            acked_before += acked
            streak = streak + 1 if acked == 0 else 0
        full_errors = len(errors)
        bad = [e for e in errors if not e.startswith("IOERR ")]
        if bad:
            die("an error that is not -IOERR: %r" % bad[0])
        print("full: %d writes acknowledged, then %d refused, e.g. -%s"
              % (acked_before, full_errors, errors[-1][:160]), flush=True)
        # The server is alive, answers PING and serves reads.
        if not r.ping():
            die("no PONG while the disk is full")
        with open(ack_path) as f:
            sample = [line.split(" ", 1) for line in f.readlines()[-50:]]
        for key, value in sample:
            got = r.get(key)
            if got is None or got.decode() != value.rstrip("\n"):
                die("read of %s while the disk is full: %r" % (key, got))
        print("while full: PING and %d reads answered" % len(sample),
              flush=True)
        # Free space: stop the load first, or it takes the space back.
        try:
            os.kill(bench_pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        os.unlink(filler)
        start = time.time()
        deadline = start + 30
        acked_after = 0
        while acked_after == 0:
            if time.time() > deadline:
                die("writes still refused 30 s after space was freed: %s"
                    % errors[-1][:200], code=3)
            acked, _ = write_batch(r, next_key, acks, errors)
            next_key += PIPELINE
            acked_after += acked
            if acked == 0:
                time.sleep(0.05)
        print("space freed: writes accepted again after %.2f s"
              % (time.time() - start), flush=True)
        while acked_after < 2000:
            acked, failed = write_batch(r, next_key, acks, errors)
            next_key += PIPELINE
            acked_after += acked
            if failed:
                die("a write refused after recovery: %s" % errors[-1][:200])
        print("acknowledged: %d before the disk filled, %d after"
              % (acked_before, acked_after), flush=True)


def verify(port, ack_path):
    r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
    with open(ack_path) as f:
        acks = [line.rstrip("\n").split(" ", 1) for line in f]
    missing = []
    for i in range(0, len(acks), 256):
        chunk = acks[i:i + 256]
        values = r.mget([k for k, _ in chunk])
        for (key, value), got in zip(chunk, values):
            if got is None or got.decode() != value:
                missing.append(key)
    if missing:
        die("%d of %d acknowledged writes lost after the restart, e.g. %s "
            "(the server answered +OK to writes it did not apply?)"
            % (len(missing), len(acks), missing[:5]))
    print("after the restart: all %d acknowledged writes are there"
          % len(acks), flush=True)
    if r.execute_command("SET", "after:restart", "v", "FENCE", 1) not in (
            True, b"OK", "OK"):
        die("a write refused after the restart")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "prefill":
        prefill(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "fill":
        fill(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) == 4 and sys.argv[1] == "verify":
        verify(int(sys.argv[2]), sys.argv[3])
    else:
        print("usage: full_disk_client.py prefill PORT ACKS | "
              "fill PORT ACKS BENCH_PID FILLER | verify PORT ACKS",
              file=sys.stderr)
        sys.exit(2)
