#pragma once
// Linux headers Glibc's Swift module does not export.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/tcp.h>

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC (accept4 needs _GNU_SOURCE, which Swift's Glibc does not set).
int pg_shim_accept_nonblocking(int listener);
