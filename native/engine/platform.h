/* platform.h - the few operating-system services the engine needs, POSIX and Windows. */
#ifndef KITE_PLATFORM_H
#define KITE_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A read-only mapping of a whole file. */
typedef struct kt_mapped_file {
    const void *data;
    size_t size;
    void *handle_file;    /* Windows: HANDLE of the file; unused on POSIX */
    void *handle_mapping; /* Windows: HANDLE of the mapping */
} kt_mapped_file;

/* 0 on success; on failure a message in err. An empty file maps to data = NULL, size = 0. */
int kt_map_file(kt_mapped_file *mf, const char *path, char *err, size_t errlen);
void kt_unmap_file(kt_mapped_file *mf);

double kt_now_ms(void);               /* monotonic clock, milliseconds */
void kt_busy_wait_us(int64_t us);     /* spins on the monotonic clock */
int kt_cpu_count(void);               /* online cores, at least 1 */
/* 0 on success or when the folder exists; -1 with errno set (ENOTDIR: a part is not a folder) */
int kt_mkdir_p(const char *path);
/* Replace dst by src atomically where the system allows (rename / MoveFileEx). 0 on success. */
int kt_rename_replace(const char *src, const char *dst);
const char *kt_os_name(void);
/* s on f with its control characters written as \xNN, so a message naming a hostile path or
 * value stays on one line. */
void kt_fputs_one_line(const char *s, FILE *f);
const char *kt_arch_name(void);

#endif
