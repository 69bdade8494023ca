#include "mhd_shims.h"
#include <stdio.h>

static void forward_log(void *cls, const char *format, va_list arguments) {
    const pg_shim_mhd_log_target *target = cls;
    char message[512];
    vsnprintf(message, sizeof message, format, arguments);
    target->handler(target->cls, message);
}

/// The options after the logger, which libmicrohttpd wants first (so it can report
/// problems with the rest).
#define PG_SHIM_MHD_COMMON_OPTIONS(o) \
    MHD_OPTION_SOCK_ADDR, (o)->address, \
    MHD_OPTION_THREAD_POOL_SIZE, (o)->thread_pool_size, \
    MHD_OPTION_CONNECTION_LIMIT, (o)->connection_limit, \
    MHD_OPTION_CONNECTION_TIMEOUT, (o)->connection_timeout_seconds, \
    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (o)->connection_memory_limit, \
    MHD_OPTION_LISTEN_BACKLOG_SIZE, (o)->listen_backlog, \
    MHD_OPTION_NOTIFY_COMPLETED, (o)->completed_handler, (o)->completed_cls, \
    MHD_OPTION_END

struct MHD_Daemon *pg_shim_mhd_start(const pg_shim_mhd_options *o) {
    if (o->log_target != NULL) {
        return MHD_start_daemon(
            o->flags | MHD_USE_ERROR_LOG, 0, NULL, NULL, o->access_handler, o->access_cls,
            MHD_OPTION_EXTERNAL_LOGGER, forward_log, o->log_target,
            PG_SHIM_MHD_COMMON_OPTIONS(o));
    }
    return MHD_start_daemon(
        o->flags, 0, NULL, NULL, o->access_handler, o->access_cls,
        PG_SHIM_MHD_COMMON_OPTIONS(o));
}

uint16_t pg_shim_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

const struct sockaddr *pg_shim_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}
