/*
 * A storage fault injector for the relay's tests, loaded with LD_PRELOAD.
 *
 * While the file named by FAULT_TRIGGER exists, each of its lines
 * "CALL ERRNO" (CALL: fsync, fdatasync, write, pwrite, rename; ERRNO: EIO,
 * ENOSPC) makes that call fail with that error, without doing anything,
 * on files and directories under FAULT_DIR (sockets, the log and every
 * other path are left alone). Each failure injected is appended to
 * FAULT_LOG as "CALL ERRNO PATH", so a test can tell that its fault hit.
 * Without the trigger file every call goes straight through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* The error the trigger file sets for CALL, or 0. */
static int armed(const char *call) {
    const char *trigger = getenv("FAULT_TRIGGER");
    if (trigger == NULL) {
        return 0;
    }
    int fd = open(trigger, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    char buf[512];
    ssize_t n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char name[32], err[32];
        if (sscanf(line, "%31s %31s", name, err) != 2 || strcmp(name, call) != 0) {
            continue;
        }
        if (strcmp(err, "EIO") == 0) {
            return EIO;
        }
        if (strcmp(err, "ENOSPC") == 0) {
            return ENOSPC;
        }
    }
    return 0;
}

/* Whether PATH lies under FAULT_DIR. */
static int under_dir(const char *path) {
    const char *dir = getenv("FAULT_DIR");
    return dir != NULL && strncmp(path, dir, strlen(dir)) == 0;
}

/* The path FD is open on, in BUF; "" if unknown. */
static const char *fd_path(int fd, char *buf, size_t len) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, len - 1);
    buf[n < 0 ? 0 : n] = '\0';
    return buf;
}

/* Records an injected failure in FAULT_LOG. */
static void note(const char *call, int err, const char *path) {
    const char *log = getenv("FAULT_LOG");
    if (log == NULL) {
        return;
    }
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        return;
    }
    char line[4200];
    int n = snprintf(line, sizeof line, "%s %s %s\n", call,
                     err == EIO ? "EIO" : "ENOSPC", path);
    if (n > 0) {
        syscall(SYS_write, fd, line, (size_t)n);
    }
    close(fd);
}

/* The error to inject into CALL on FD, or 0. */
static int fault_fd(const char *call, int fd) {
    int saved = errno;
    int err = armed(call);
    char path[4096];
    if (err != 0 && !under_dir(fd_path(fd, path, sizeof path))) {
        err = 0;
    }
    if (err != 0) {
        note(call, err, path);
    }
    errno = saved;
    return err;
}

typedef int (*sync_fn)(int);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*rename_fn)(const char *, const char *);

/* The libc function NAME, of type TYPE, as real_NAME. */
#define REAL(name, type) \
    static type real_##name; \
    if (real_##name == NULL) { \
        real_##name = (type)dlsym(RTLD_NEXT, #name); \
    }

int fsync(int fd) {
    REAL(fsync, sync_fn);
    int err = fault_fd("fsync", fd);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync, sync_fn);
    int err = fault_fd("fdatasync", fd);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return real_fdatasync(fd);
}

ssize_t write(int fd, const void *buf, size_t len) {
    REAL(write, write_fn);
    int err = fault_fd("write", fd);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return real_write(fd, buf, len);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t at) {
    REAL(pwrite, pwrite_fn);
    int err = fault_fd("pwrite", fd);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return real_pwrite(fd, buf, len, at);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t at) {
    REAL(pwrite64, pwrite_fn);
    int err = fault_fd("pwrite", fd);
    if (err != 0) {
        errno = err;
        return -1;
    }
    return real_pwrite64(fd, buf, len, at);
}

int rename(const char *from, const char *to) {
    REAL(rename, rename_fn);
    int saved = errno;
    int err = armed("rename");
    if (err != 0 && (under_dir(from) || under_dir(to))) {
        note("rename", err, to);
        errno = err;
        return -1;
    }
    errno = saved;
    return real_rename(from, to);
}
