// Copyright (c) fencedkv authors.
#include "fenced_bench_tool.h"

int main(int argc, char** argv) {
  return fencedkv::FencedBenchTool(argc, argv);
}
