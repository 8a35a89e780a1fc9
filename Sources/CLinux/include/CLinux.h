#ifndef PARLEY_CLINUX_H
#define PARLEY_CLINUX_H

/* What `import Glibc` lacks on this toolchain: epoll, accept4, eventfd, signalfd, timerfd,
   plus small wrappers for macros and variadic calls Swift cannot use directly. */

#include <stdint.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sched.h>

int parley_epoll_create(void);
int parley_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);
int parley_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout);
uint64_t parley_epoll_event_data(const struct epoll_event *event);
uint32_t parley_epoll_event_events(const struct epoll_event *event);

int parley_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
int parley_eventfd(unsigned int initval, int flags);
int parley_signalfd_block(const int *signals, int count);
int parley_signalfd_read(int fd);
/* SIGPIPE ignored for the process (sendfile(2) has no MSG_NOSIGNAL); children reset it. */
int parley_ignore_sigpipe(void);
int parley_timerfd_create(void);
int parley_timerfd_arm(int fd, int64_t nanoseconds_from_now);

int parley_fcntl_set_nonblocking(int fd);
int parley_cpu_count(void);
pid_t parley_gettid(void);
int parley_set_thread_name(const char *name);

/* sendfile(2) from `in_fd` at `*offset` (advanced) to the socket `out_fd`; readahead(2). */
ssize_t parley_sendfile(int out_fd, int in_fd, int64_t *offset, size_t count);
ssize_t parley_readahead(int fd, int64_t offset, size_t count);

static const uint32_t PARLEY_EPOLLIN = EPOLLIN;
static const uint32_t PARLEY_EPOLLOUT = EPOLLOUT;
static const uint32_t PARLEY_EPOLLERR = EPOLLERR;
static const uint32_t PARLEY_EPOLLHUP = EPOLLHUP;
static const uint32_t PARLEY_EPOLLRDHUP = EPOLLRDHUP;
static const int PARLEY_SOCK_NONBLOCK_CLOEXEC = SOCK_NONBLOCK | SOCK_CLOEXEC;
static const int PARLEY_EFD_NONBLOCK_CLOEXEC = EFD_NONBLOCK | EFD_CLOEXEC;
static const int PARLEY_EFD_SEMAPHORE_CLOEXEC = EFD_SEMAPHORE | EFD_CLOEXEC;
static const int PARLEY_SHUT_WR = SHUT_WR;
static const int PARLEY_SOCK_STREAM = SOCK_STREAM;

#endif
