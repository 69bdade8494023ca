#define _GNU_SOURCE
#include <stddef.h>
#include <spawn.h>
#include <sys/socket.h>
#include "system_shims.h"

int pg_shim_accept_nonblocking(int listener) {
    return accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int pg_shim_spawn_close_from(posix_spawn_file_actions_t *actions, int low) {
    return posix_spawn_file_actions_addclosefrom_np(actions, low);
}
