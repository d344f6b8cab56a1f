# CMake toolchain file: cross-build for 64-bit Windows with MinGW-w64 (x86_64-w64-mingw32-gcc).
#
#   cmake -S native -B build/win64-mingw/engine \
#         -DCMAKE_TOOLCHAIN_FILE=native/cmake/toolchain-mingw-w64-x86_64.cmake
#
# Debian: apt-get install gcc-mingw-w64-x86-64 (and wine + wine64 to run the result).
# Executables are linked statically (no libgcc / libwinpthread DLLs to ship next to kite.exe);
# DLLs link libgcc statically. With wine on PATH, CMAKE_CROSSCOMPILING_EMULATOR lets ctest and
# try_run execute the .exe files.

set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(KITE_MINGW_TRIPLE "x86_64-w64-mingw32" CACHE STRING "MinGW-w64 target triple (tool prefix)")

# Debian ships <triple>-gcc (an alternative, win32 thread model by default) plus -posix / -win32
# variants; take the plain name first.
find_program(KITE_MINGW_CC NAMES ${KITE_MINGW_TRIPLE}-gcc ${KITE_MINGW_TRIPLE}-gcc-posix
             ${KITE_MINGW_TRIPLE}-gcc-win32)
if(NOT KITE_MINGW_CC)
  message(FATAL_ERROR "${KITE_MINGW_TRIPLE}-gcc not found (Debian: apt-get install gcc-mingw-w64-x86-64)")
endif()
set(CMAKE_C_COMPILER "${KITE_MINGW_CC}")
find_program(KITE_MINGW_CXX NAMES ${KITE_MINGW_TRIPLE}-g++ ${KITE_MINGW_TRIPLE}-g++-posix
             ${KITE_MINGW_TRIPLE}-g++-win32)
if(KITE_MINGW_CXX)
  set(CMAKE_CXX_COMPILER "${KITE_MINGW_CXX}")
endif()
find_program(CMAKE_RC_COMPILER NAMES ${KITE_MINGW_TRIPLE}-windres windres)
find_program(CMAKE_AR NAMES ${KITE_MINGW_TRIPLE}-ar)
find_program(CMAKE_RANLIB NAMES ${KITE_MINGW_TRIPLE}-ranlib)

# Look for headers and libraries in the target's sysroot only; programs on the build host.
set(CMAKE_FIND_ROOT_PATH /usr/${KITE_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static-libgcc")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-static-libgcc")

find_program(KITE_WINE NAMES wine wine64)
if(KITE_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${KITE_WINE}")
endif()
