/*
 * A test-only stand-in for Windows' bcryptprimitives.dll, for running Windows binaries under
 * Wine 8, which lacks it. Rust's standard library (1.78+) draws its random numbers from
 * ProcessPrng there; Windows 10 and later have it. This answers from RtlGenRandom
 * (advapi32's SystemFunction036), which Wine has. Never shipped: scripts/run-emulated.sh
 * builds it with mingw-w64 and puts it beside the Windows node.exe it runs.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x7fffffff ? 0x7fffffff : (ULONG)length;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
