// Copyright (c) fencedkv authors.
//
// fencedkv-admin: inspect, check, back up and restore a fencedkv store
// (admin_tool.h; --help lists the verbs).

#include "admin_tool.h"

int main(int argc, char** argv) {
  return fencedkv::admin::RunAdminTool(argc, argv);
}
