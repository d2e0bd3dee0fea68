/* What a process still maps when it exits: each mapping's resident kB (64 kB and up), printed to
 * stderr from a destructor, i.e. after `main` returns and before the kernel tears the mappings
 * down. That teardown is what `exit-latency.py` times.
 *
 *   gcc -shared -fPIC -O2 smaps-at-exit.c -o /tmp/smaps-at-exit.so
 *   LD_PRELOAD=/tmp/smaps-at-exit.so target/release/splitpkg plan TREE 2>&1 >/dev/null | sort -rn
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((destructor)) static void report(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512], name[512] = "";
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        /* A mapping's header: "start-end perms offset dev inode [path]". */
        if (strchr(line, '-') && strlen(line) > 40 && line[0] != 'R' && line[0] != 'V') {
            char *p = strrchr(line, ' ');
            snprintf(name, sizeof name, "%s", p + 1);
            name[strcspn(name, "\n")] = 0;
            if (!name[0])
                snprintf(name, sizeof name, "[anon]");
        }
        if (!strncmp(line, "Rss:", 4)) {
            long kb = atol(line + 4);
            if (kb >= 64)
                fprintf(stderr, "%8ld kB %s\n", kb, name);
        }
    }
    fclose(f);
}
