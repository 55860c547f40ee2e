// Programs built for the relaxed-SIMD WebAssembly build (emcc 3.1.6 driving clang-19): clang-19
// names a wasm program's `int main(int, char**)` __main_argc_argv, which Emscripten 3.1.6's
// runtime does not know (it exports and calls `main`; clang-14 kept that name). This defines the
// symbol `main` (an asm label: the frontend's renaming applies to functions named main only) and
// forwards to the program's own main. Linked into the tests and examples of that build only.
extern "C" int __main_argc_argv(int argc, char** argv);

extern "C" int maskattn_emscripten_main(int argc, char** argv) __asm__("main");
extern "C" int maskattn_emscripten_main(int argc, char** argv) { return __main_argc_argv(argc, argv); }
