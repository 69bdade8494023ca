#pragma once
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <microhttpd.h>

/// Receives libmicrohttpd's error messages, already formatted.
typedef void (*pg_shim_mhd_log_fn)(void *cls, const char *message);

/// Where error messages go. Owned by the caller, who keeps it alive until the
/// daemon is stopped.
typedef struct {
    pg_shim_mhd_log_fn handler;
    void *cls;
} pg_shim_mhd_log_target;

/// The options Pushgate sets on a daemon (MHD_start_daemon is variadic).
typedef struct {
    unsigned int flags;
    const struct sockaddr *address; /// where to listen (IPv4 or IPv6, port 0 for any)
    unsigned int thread_pool_size; /// 0 or 1: no pool (one internal thread, or none)
    unsigned int connection_limit;
    unsigned int per_ip_connection_limit; /// 0: none
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit; /// bounds the request line and headers
    unsigned int listen_backlog;
    MHD_AccessHandlerCallback access_handler;
    void *access_cls;
    MHD_RequestCompletedCallback completed_handler;
    void *completed_cls;
    MHD_NotifyConnectionCallback connection_handler; /// told of each connection opened and closed
    void *connection_cls;
    pg_shim_mhd_log_target *log_target; /// optional
} pg_shim_mhd_options;

/// MHD_start_daemon with a fixed argument list.
struct MHD_Daemon *pg_shim_mhd_start(const pg_shim_mhd_options *options);

/// The port the daemon listens on (useful after binding port 0), or 0.
uint16_t pg_shim_mhd_bound_port(struct MHD_Daemon *daemon);

/// The epoll descriptor of a daemon started without an internal thread (watched by
/// the caller's own event loop), or -1.
int pg_shim_mhd_epoll_fd(struct MHD_Daemon *daemon);

/// The peer address of a connection, or NULL (MHD_get_connection_info is variadic).
const struct sockaddr *pg_shim_mhd_client_address(struct MHD_Connection *connection);

/// Sets one connection's idle timeout (MHD_set_connection_option is variadic).
void pg_shim_mhd_set_connection_timeout(struct MHD_Connection *connection, unsigned int seconds);
