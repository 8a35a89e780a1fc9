#define _GNU_SOURCE
#include "CLinux.h"
#include <fcntl.h>
#include <unistd.h>
#include <string.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/sendfile.h>

int parley_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int parley_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

int parley_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout) {
    return epoll_wait(epfd, events, maxevents, timeout);
}

uint64_t parley_epoll_event_data(const struct epoll_event *event) { return event->data.u64; }
uint32_t parley_epoll_event_events(const struct epoll_event *event) { return event->events; }

int parley_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    return accept4(fd, addr, len, flags);
}

int parley_eventfd(unsigned int initval, int flags) { return eventfd(initval, flags); }

int parley_ignore_sigpipe(void) {
    return signal(SIGPIPE, SIG_IGN) == SIG_ERR ? -1 : 0;
}

int parley_signalfd_block(const int *signals, int count) {
    sigset_t mask;
    sigemptyset(&mask);
    for (int i = 0; i < count; i++) sigaddset(&mask, signals[i]);
    if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0) return -1;
    return signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
}

int parley_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof(info));
    if (n != sizeof(info)) return -1;
    return (int)info.ssi_signo;
}

int parley_timerfd_create(void) {
    return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
}

int parley_timerfd_arm(int fd, int64_t ns) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof(spec));
    if (ns <= 0) ns = 1;
    spec.it_value.tv_sec = ns / 1000000000LL;
    spec.it_value.tv_nsec = ns % 1000000000LL;
    return timerfd_settime(fd, 0, &spec, NULL);
}

int parley_fcntl_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL, 0);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

int parley_cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

pid_t parley_gettid(void) { return (pid_t)syscall(SYS_gettid); }

int parley_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }

ssize_t parley_sendfile(int out_fd, int in_fd, int64_t *offset, size_t count) {
    off_t position = (off_t)*offset;
    ssize_t n = sendfile(out_fd, in_fd, &position, count);
    *offset = (int64_t)position;
    return n;
}

ssize_t parley_readahead(int fd, int64_t offset, size_t count) { return readahead(fd, (off64_t)offset, count); }
