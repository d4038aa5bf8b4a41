/* Forced into every llama.cpp source file by scripts/rebuild_llama_cpp.py (gcc -include).
 *
 * GCC 12's _tile_loadconfig declares its operand as one 8-byte pointer, so the optimizer drops the stores that
 * fill the rest of the 64-byte tile configuration, and ldtilecfg loads stale stack bytes: llama.cpp's AMX matrix
 * kernels die of a general protection fault at the first batch of two tokens or more. This definition tells the
 * compiler that all 64 bytes are read. Other compilers, and builds without AMX, are left as they are.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AMX_TILE__) && defined(__x86_64__)
#include <immintrin.h>
#undef _tile_loadconfig
#define _tile_loadconfig(config) \
    __asm__ volatile ("ldtilecfg\t%X0" :: "m" (*(const unsigned char (*)[64]) (config)))
#endif
