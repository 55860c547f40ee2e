# cmake -DGLUE=<file> -P fix_exception_refcount.cmake: in Emscripten 3.1.6's pthreads glue, index
# the exception's reference count with an unsigned shift (see bindings/CMakeLists.txt). Fails if
# the pattern is not there exactly twice (another Emscripten version: look again).
file(READ "${GLUE}" text)
# Minified (-O3 link: "this.ptr+0>>2") or not (the relaxed builds' -O1 link: "this.ptr + 0 >> 2").
set(signed "(Atomics\\.(add|sub)\\(GROWABLE_HEAP_I32\\(\\), ?this\\.ptr ?\\+ ?0 ?)>>( ?2,)")
string(REGEX MATCHALL "${signed}" found "${text}")
list(LENGTH found count)
if(NOT count EQUAL 2)
  message(FATAL_ERROR "${GLUE}: expected the exception refcount's Atomics.add/sub with a signed index twice, found ${count}")
endif()
string(REGEX REPLACE "${signed}" "\\1>>>\\3" text "${text}")
file(WRITE "${GLUE}" "${text}")
