#!/usr/bin/env bash
# rooms.sh: the rooms of the code, one folder a line, from the peat_module() lines of
# CMakeLists.txt (a room is a folder CMake builds as its own library: core, store, ...,
# harness/isolate, ...), in the order CMakeLists.txt declares them. The layout, prefix and
# call-circle checks read their list of rooms here.
cd "$(dirname "$0")/.."
grep -oE '^peat_module\(peat_[a-z]+ [a-z/]+' CMakeLists.txt | awk '{print $2}'
