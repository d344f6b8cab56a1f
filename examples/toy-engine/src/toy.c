/* toy: a stand-in engine of another shape than kite, for the harness's example project.
 *
 *   toy about                               facts about the program, JSON on stdout
 *   toy table N [--order up|down] [--out DIR] [--json]
 *       computes squares[i] = i * i / 2 for i < N, filling the table upwards or downwards;
 *       with --out, writes DIR/squares.f32 and DIR/facts.json (what configs/engine.yaml declares);
 *       with --json, prints the facts on stdout. The facts hold the time the fill took
 *       (timings.fill_ms, processor time), which a compare workload times.
 *
 * Exit status: 0 done, 2 bad arguments, 1 a file could not be written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <direct.h>
#define make_dir(path) _mkdir(path)
#else
#include <sys/stat.h>
#define make_dir(path) mkdir(path, 0755)
#endif

static int usage(const char *why) {
    fprintf(stderr, "toy: %s\nusage: toy about | toy table N [--order up|down] [--out DIR] [--json]\n", why);
    return 2;
}

static int write_table(const char *dir, const float *squares, long n, const char *facts) {
    char path[4096];
    make_dir(dir); /* may exist already; a real failure shows as the fopen below failing */
    snprintf(path, sizeof path, "%s/squares.f32", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(squares, sizeof(float), (size_t)n, f) != (size_t)n || fclose(f) != 0) {
        fprintf(stderr, "toy: cannot write %s\n", path);
        return 1;
    }
    snprintf(path, sizeof path, "%s/facts.json", dir);
    f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "toy: cannot write %s\n", path);
        return 1;
    }
    fputs(facts, f);
    return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "about") == 0) {
        printf("{\"name\": \"toy\", \"version\": 1, \"dumps\": [\"squares\"]}\n");
        return 0;
    }
    if (argc < 3 || strcmp(argv[1], "table") != 0) return usage("unknown command");
    char *end = NULL;
    long n = strtol(argv[2], &end, 10);
    if (*end != '\0' || n < 1 || n > 1000000) return usage("N must be an integer from 1 to 1000000");
    const char *order = "up", *out = NULL;
    int json = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) { json = 1; continue; }
        if (i + 1 >= argc) return usage("an option lacks its value");
        if (strcmp(argv[i], "--order") == 0) order = argv[++i];
        else if (strcmp(argv[i], "--out") == 0) out = argv[++i];
        else return usage("unknown option");
    }
    if (strcmp(order, "up") != 0 && strcmp(order, "down") != 0) return usage("--order is up or down");

    float *squares = malloc((size_t)n * sizeof(float)); /* [n] */
    if (!squares) return 1;
    clock_t start = clock();
    for (long k = 0; k < n; k++) {
        long i = strcmp(order, "up") == 0 ? k : n - 1 - k;
        squares[i] = (float)i * (float)i / 2.0f;
    }
    double fill_ms = 1000.0 * (double)(clock() - start) / CLOCKS_PER_SEC;
    char facts[256];
    snprintf(facts, sizeof facts, "{\"dims\": {\"squares\": [%ld]}, \"order\": \"%s\", "
             "\"timings\": {\"fill_ms\": %.6f}}\n", n, order, fill_ms);
    if (json) fputs(facts, stdout);
    int rc = out ? write_table(out, squares, n, facts) : 0;
    free(squares);
    return rc;
}
