/* platform.c - POSIX and Windows branches of every system call the engine makes. */
#if !defined(_WIN32)
#  define _POSIX_C_SOURCE 200809L
#endif
#include "platform.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(_WIN32)
#  define WIN32_LEAN_AND_MEAN
#  include <windows.h>
#  include <direct.h>
#else
#  include <fcntl.h>
#  include <sys/mman.h>
#  include <sys/stat.h>
#  include <time.h>
#  include <unistd.h>
#endif

#if defined(_WIN32)

int kt_map_file(kt_mapped_file *mf, const char *path, char *err, size_t errlen) {
    memset(mf, 0, sizeof *mf);
    DWORD attributes = GetFileAttributesA(path);
    if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY)) {
        snprintf(err, errlen, "'%s' is not a regular file (a directory)", path);
        return -1;
    }
    HANDLE f = CreateFileA(path, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, NULL);
    if (f == INVALID_HANDLE_VALUE) {
        snprintf(err, errlen, "cannot open '%s' (Windows error %lu)", path,
                 (unsigned long)GetLastError());
        return -1;
    }
    if (GetFileType(f) != FILE_TYPE_DISK) { /* a pipe or a character device (NUL, CON) */
        snprintf(err, errlen, "'%s' is not a regular file (a pipe or a device)", path);
        CloseHandle(f);
        return -1;
    }
    LARGE_INTEGER sz;
    if (!GetFileSizeEx(f, &sz)) {
        snprintf(err, errlen, "cannot get the size of '%s'", path);
        CloseHandle(f);
        return -1;
    }
    if ((uint64_t)sz.QuadPart > (uint64_t)SIZE_MAX) {
        snprintf(err, errlen, "'%s' is too large to map", path);
        CloseHandle(f);
        return -1;
    }
    mf->size = (size_t)sz.QuadPart;
    mf->handle_file = f;
    if (mf->size == 0)
        return 0;
    HANDLE m = CreateFileMappingA(f, NULL, PAGE_READONLY, 0, 0, NULL);
    if (!m) {
        snprintf(err, errlen, "cannot map '%s' (Windows error %lu)", path,
                 (unsigned long)GetLastError());
        CloseHandle(f);
        mf->handle_file = NULL;
        return -1;
    }
    const void *p = MapViewOfFile(m, FILE_MAP_READ, 0, 0, 0);
    if (!p) {
        snprintf(err, errlen, "cannot map a view of '%s' (Windows error %lu)", path,
                 (unsigned long)GetLastError());
        CloseHandle(m);
        CloseHandle(f);
        mf->handle_file = NULL;
        return -1;
    }
    mf->handle_mapping = m;
    mf->data = p;
    return 0;
}

void kt_unmap_file(kt_mapped_file *mf) {
    if (mf->data)
        UnmapViewOfFile(mf->data);
    if (mf->handle_mapping)
        CloseHandle((HANDLE)mf->handle_mapping);
    if (mf->handle_file)
        CloseHandle((HANDLE)mf->handle_file);
    memset(mf, 0, sizeof *mf);
}

double kt_now_ms(void) {
    static LARGE_INTEGER freq;
    LARGE_INTEGER t;
    if (freq.QuadPart == 0)
        QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&t);
    return (double)t.QuadPart * 1000.0 / (double)freq.QuadPart;
}

int kt_cpu_count(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
}

int kt_mkdir_p(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = n ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\\' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (!(i == 2 && buf[1] == ':')) {
                if (_mkdir(buf) != 0 && errno != EEXIST)
                    return -1;
            }
            buf[i] = c;
        }
    }
    DWORD attributes = GetFileAttributesA(path); /* EEXIST is also a file of that name */
    if (attributes == INVALID_FILE_ATTRIBUTES || !(attributes & FILE_ATTRIBUTE_DIRECTORY)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int kt_rename_replace(const char *src, const char *dst) {
    return MoveFileExA(src, dst, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH) ? 0 : -1;
}

const char *kt_os_name(void) { return "windows"; }

#else /* POSIX */

/* What a path that is not a regular file is, for the message. */
static const char *file_kind(mode_t mode) {
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "of another kind";
}

int kt_map_file(kt_mapped_file *mf, const char *path, char *err, size_t errlen) {
    memset(mf, 0, sizeof *mf);
    /* non-blocking: opening a FIFO must not wait for a writer before fstat can refuse it */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat '%s': %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s' is not a regular file (%s)", path, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        snprintf(err, errlen, "'%s' is too large to map", path);
        close(fd);
        return -1;
    }
    mf->size = (size_t)st.st_size;
    if (mf->size == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, mf->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "cannot map '%s': %s", path, strerror(errno));
        mf->size = 0;
        return -1;
    }
    mf->data = p;
    return 0;
}

void kt_unmap_file(kt_mapped_file *mf) {
    if (mf->data)
        munmap((void *)mf->data, mf->size);
    memset(mf, 0, sizeof *mf);
}

double kt_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1.0e6;
}

int kt_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int kt_mkdir_p(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = n ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            buf[i] = c;
        }
    }
    struct stat st; /* EEXIST is also a file of that name */
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int kt_rename_replace(const char *src, const char *dst) {
    return rename(src, dst);
}

const char *kt_os_name(void) {
#  if defined(__linux__)
    return "linux";
#  elif defined(__APPLE__)
    return "macos";
#  else
    return "posix";
#  endif
}

#endif

void kt_fputs_one_line(const char *s, FILE *f) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

void kt_busy_wait_us(int64_t us) {
    if (us <= 0)
        return;
    double end = kt_now_ms() + (double)us / 1000.0;
    while (kt_now_ms() < end) {
    }
}

const char *kt_arch_name(void) {
#if defined(__x86_64__) || defined(_M_X64)
    return "x86_64";
#elif defined(__aarch64__) || defined(_M_ARM64)
    return "aarch64";
#elif defined(__i386__) || defined(_M_IX86)
    return "x86";
#else
    return "unknown";
#endif
}
