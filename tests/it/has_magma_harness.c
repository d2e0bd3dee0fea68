/* Harness for tests/it/has_magma.rs: loads an installed libtorch_cuda.so by the path given (as
 * torch's extension loads it: a path that may be pytorch's site-packages link), asks it
 * mini_cuda_has_magma() (what torch.cuda.has_magma reads), then reports whether
 * libtorch_cuda_linalg.so is mapped into the process (/proc/self/maps). With "then-linalg" it makes
 * the first linalg call afterwards and reports the mapping again, so the test sees that the
 * mapping check does notice a load.
 * Prints "has_magma=N linalg_mapped=N[ after_linalg_call=N]"; exit 2 on a usage or load error. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int linalg_mapped(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    if (!maps) return -1;
    while (fgets(line, sizeof line, maps))
        if (strstr(line, "/libtorch_cuda_linalg.so")) found = 1;
    fclose(maps);
    return found;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIBTORCH_CUDA [then-linalg]\n", argv[0]);
        return 2;
    }
    void *core = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!core) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*has_magma)(void) = (int (*)(void))dlsym(core, "mini_cuda_has_magma");
    if (!has_magma) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 2;
    }
    printf("has_magma=%d linalg_mapped=%d", has_magma(), linalg_mapped());
    if (argc > 2 && strcmp(argv[2], "then-linalg") == 0) {
        /* at::cuda::linalg_call(int) of the fixture's torch/cuda.cpp: dlopens the lazy library */
        int (*linalg_call)(int) = (int (*)(int))dlsym(core, "_ZN2at4cuda11linalg_callEi");
        if (!linalg_call) {
            fprintf(stderr, "dlsym: %s\n", dlerror());
            return 2;
        }
        int r = linalg_call(1);
        printf(" after_linalg_call=%d linalg_result=%d", linalg_mapped(), r);
    }
    printf("\n");
    return 0;
}
