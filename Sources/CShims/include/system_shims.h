#pragma once
// Linux headers Glibc's Swift module does not export.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <netinet/tcp.h>
#include <spawn.h>

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC (accept4 needs _GNU_SOURCE, which Swift's Glibc does not set).
int pg_shim_accept_nonblocking(int listener);

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34, _GNU_SOURCE too): the child
/// closes every descriptor from `low` up, so it inherits none it was not given.
int pg_shim_spawn_close_from(posix_spawn_file_actions_t *actions, int low);
