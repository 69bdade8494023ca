#include "mhd_shims.h"
#include <stdio.h>

static void forward_log(void *cls, const char *format, va_list arguments) {
    const pg_shim_mhd_log_target *target = cls;
    char message[512];
    vsnprintf(message, sizeof message, format, arguments);
    target->handler(target->cls, message);
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// libmicrohttpd's own unescaping of the path and query (`%HH`, in place), except that
/// `%00` stays as its three characters: the handler receives the path as a C string,
/// so a decoded NUL would end it there, and `/p/<id>%00junk` would act on `<id>`.
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *connection, char *text) {
    (void)cls;
    (void)connection;
    char *read = text, *write = text;
    while (*read != '\0') {
        int high = read[0] == '%' ? hex_digit(read[1]) : -1;
        int low = high >= 0 ? hex_digit(read[2]) : -1;
        if (low >= 0 && (high | low) != 0) {
            *write++ = (char)(high * 16 + low);
            read += 3;
        } else {
            *write++ = *read++;
        }
    }
    *write = '\0';
    return (size_t)(write - text);
}

/// The options after the logger, which libmicrohttpd wants first (so it can report
/// problems with the rest).
/// `pool` holds the thread pool size, or nothing for a daemon without a pool
/// (libmicrohttpd warns about a size of 0 or 1).
#define PG_SHIM_MHD_COMMON_OPTIONS(o, pool) \
    MHD_OPTION_SOCK_ADDR, (o)->address, \
    MHD_OPTION_ARRAY, (pool), \
    MHD_OPTION_CONNECTION_LIMIT, (o)->connection_limit, \
    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (o)->per_ip_connection_limit, \
    MHD_OPTION_CONNECTION_TIMEOUT, (o)->connection_timeout_seconds, \
    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (o)->connection_memory_limit, \
    MHD_OPTION_LISTEN_BACKLOG_SIZE, (o)->listen_backlog, \
    MHD_OPTION_NOTIFY_COMPLETED, (o)->completed_handler, (o)->completed_cls, \
    MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL, \
    MHD_OPTION_NOTIFY_CONNECTION, (o)->connection_handler, (o)->connection_cls, \
    MHD_OPTION_END

struct MHD_Daemon *pg_shim_mhd_start(const pg_shim_mhd_options *o) {
    struct MHD_OptionItem pool[] = {
        {o->thread_pool_size > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, o->thread_pool_size, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    if (o->log_target != NULL) {
        return MHD_start_daemon(
            o->flags | MHD_USE_ERROR_LOG, 0, NULL, NULL, o->access_handler, o->access_cls,
            MHD_OPTION_EXTERNAL_LOGGER, forward_log, o->log_target,
            PG_SHIM_MHD_COMMON_OPTIONS(o, pool));
    }
    return MHD_start_daemon(
        o->flags, 0, NULL, NULL, o->access_handler, o->access_cls,
        PG_SHIM_MHD_COMMON_OPTIONS(o, pool));
}

uint16_t pg_shim_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

const struct sockaddr *pg_shim_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

void pg_shim_mhd_set_connection_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

int pg_shim_mhd_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info == NULL ? -1 : info->epoll_fd;
}
