/*
 * server.c: tdlisten's listening sockets.  Accepts connections and hands
 * each to the accept callback (agentconn_accept()); when the process runs out
 * of descriptors it pauses accepting for a second (acceptpause.c) instead
 * of dying or spinning.  A TCP port on every address of --bind, with --unix a Unix
 * socket that QEMU connects guests' virtio-serial ports to (its peers are
 * named unix:PID), and with --vsock an AF_VSOCK port for guests (peers
 * vsock:CID:PORT).
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <event2/listener.h>
#include <event2/util.h>

#include "acceptpause.h"
#include "listener.h"
#include "log.h"
#include "probeport.h"
#include "server.h"
#include "tdlimits.h"
#include "banned.h"

#define SERVER_MAX_LISTENERS	8

static struct evconnlistener	*server_lev[SERVER_MAX_LISTENERS];
static const char		*server_unix_path;	/* --unix */
static int			 server_nlev;
static struct accept_pause	*server_pause;
static server_accept_fn		 server_accept_fn_cb;
static void			*server_accept_arg;
static bool			 server_tls;

static void
server_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	char peer[NI_MAXHOST + NI_MAXSERV + 4];

	if (sa->sa_family == AF_VSOCK) {
		const struct sockaddr_vm *vm = (const struct sockaddr_vm *)sa;

		/* a guest of this host: its context id names it */
		snprintf(peer, sizeof peer, "vsock:%u:%u", vm->svm_cid,
		    vm->svm_port);
	} else if (sa->sa_family == AF_UNIX) {
		struct ucred cr;
		socklen_t crlen = sizeof cr;

		/* a local process (QEMU): its pid stands for the port */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == 0)
			snprintf(peer, sizeof peer, "unix:%ld", (long)cr.pid);
		else
			snprintf(peer, sizeof peer, "unix:?");
	} else {
		if (getnameinfo(sa, salen, host, sizeof host, serv,
		    sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
			snprintf(host, sizeof host, "?");
		snprintf(peer, sizeof peer, sa->sa_family == AF_INET6 ?
		    "[%s]:%s" : "%s:%s", host, serv);
		if (strncmp(host, "::ffff:", 7) == 0)
			snprintf(peer, sizeof peer, "%s:%s", host + 7, serv);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof (int));
	evutil_make_socket_nonblocking(fd);
	log_debug("connection from %s", peer);
	server_accept_fn_cb(fd, sa, peer, server_accept_arg);
}

/*
 * Listen on the Unix socket path too (--unix), mode 0660.  A socket file
 * left by an earlier tdlisten is replaced; one another process still
 * listens on, or a file that is not a socket, is not.
 */
static int
server_listen_unix(struct event_base *base, const char *path)
{
	struct sockaddr_un sun;
	struct evconnlistener *lev;
	struct stat st;
	mode_t mask;
	int fd, probe, r;

	if (server_nlev >= SERVER_MAX_LISTENERS) {
		log_warnx("--unix '%s': too many listening sockets", path);
		return -1;
	}
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		log_warnx("--unix '%s': longer than %zu bytes", path,
		    sizeof sun.sun_path - 1);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_warnx("--unix '%s': exists and is not a socket",
			    path);
			return -1;
		}
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe != -1 && connect(probe, (struct sockaddr *)&sun,
		    sizeof sun) == 0) {
			close(probe);
			log_warnx("--unix '%s': another process listens there",
			    path);
			return -1;
		}
		if (probe != -1)
			close(probe);
		unlink(path);	/* an earlier tdlisten's */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1) {
		log_warn("--unix '%s'", path);
		return -1;
	}
	mask = umask(0117);
	r = bind(fd, (struct sockaddr *)&sun, sizeof sun);
	umask(mask);
	if (r == -1) {
		log_warn("cannot listen on '%s'", path);
		close(fd);
		return -1;
	}
	lev = evconnlistener_new(base, server_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE, 512, fd);
	if (lev == NULL) {
		log_warn("cannot listen on '%s'", path);
		close(fd);
		unlink(path);
		return -1;
	}
	accept_pause_watch(server_pause, lev);
	server_lev[server_nlev++] = lev;
	server_unix_path = path;
	log_info("listening on Unix socket '%s'%s", path, server_tls ?
	    " (TLS 1.3, client certificates required)" :
	    " (INSECURE: no encryption, no authentication)");
	return 0;
}

/*
 * Listen on AF_VSOCK port too (--vsock), for guests of this host: any
 * context id (VMADDR_CID_ANY).  A kernel without vsock refuses the socket:
 * said so, and tdlisten does not start.
 */
static int
server_listen_vsock(struct event_base *base, uint32_t port)
{
	struct sockaddr_vm vm;
	struct evconnlistener *lev;
	int fd;

	if (server_nlev >= SERVER_MAX_LISTENERS) {
		log_warnx("--vsock %u: too many listening sockets", port);
		return -1;
	}
	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd == -1) {
		log_warn("--vsock %u: this kernel offers no AF_VSOCK socket "
		    "(modprobe vsock, or a transport: vhost_vsock on a host)",
		    port);
		return -1;
	}
	memset(&vm, 0, sizeof vm);
	vm.svm_family = AF_VSOCK;
	vm.svm_cid = VMADDR_CID_ANY;
	vm.svm_port = port;
	if (bind(fd, (struct sockaddr *)&vm, sizeof vm) == -1) {
		log_warn("cannot listen on vsock port %u", port);
		close(fd);
		return -1;
	}
	lev = evconnlistener_new(base, server_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE, 512, fd);
	if (lev == NULL) {
		log_warn("cannot listen on vsock port %u", port);
		close(fd);
		return -1;
	}
	accept_pause_watch(server_pause, lev);
	server_lev[server_nlev++] = lev;
	log_info("listening on vsock port %u%s", port, server_tls ?
	    " (TLS 1.3, client certificates required)" :
	    " (INSECURE: no encryption, no authentication)");
	return 0;
}

/* Listen at port on the addresses of bind: server.h. */
int
server_listen_tcp(struct event_base *base, const char *addr,
    const char *port, const struct server_tcp *how,
    struct evconnlistener **levs, int max)
{
	struct addrinfo hints, *res, *ai;
	char host[NI_MAXHOST];
	int e, fd, n = 0, one = 1;

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | (how->numeric ? AI_NUMERICHOST : 0);
	if ((e = getaddrinfo(addr, port, &hints, &res)) != 0) {
		if (how->opt != NULL)
			log_warnx("%s '%s' port '%s': %s", how->opt,
			    addr ? addr : "*", port, gai_strerror(e));
		else
			log_warnx("cannot resolve '%s' port '%s': %s",
			    addr ? addr : "*", port, gai_strerror(e));
		return -1;
	}
	for (ai = res; ai != NULL && n < max; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd == -1)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
			    sizeof one);
		getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof host,
		    NULL, 0, NI_NUMERICHOST);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == -1 ||
		    (levs[n] = evconnlistener_new(base, how->cb, NULL,
		    LEV_OPT_CLOSE_ON_FREE, how->backlog, fd)) == NULL) {
			log_warn("%s on %s port %s", how->fail, host, port);
			close(fd);
			while (n > 0)
				evconnlistener_free(levs[--n]);
			freeaddrinfo(res);
			return -1;
		}
		if (how->pause != NULL &&
		    accept_pause_watch(how->pause, levs[n]) == -1) {
			log_warnx("%s on %s port %s: too many listening "
			    "sockets", how->fail, host, port);
			while (n >= 0)
				evconnlistener_free(levs[n--]);
			freeaddrinfo(res);
			return -1;
		}
		n++;
		log_info("%s on %s port %s%s", how->ok, host, port, how->tail);
	}
	freeaddrinfo(res);
	if (n == 0)
		log_warn("%s port %s", how->fail, port);
	return n > 0 ? n : -1;
}

/* Listen on every address of cfg->bind (all when NULL) at cfg->port. */
int
server_start(struct event_base *base, const struct listener_config *cfg,
    bool tls, server_accept_fn accept, void *arg)
{
	struct server_tcp how = {
		.fail = "cannot listen",
		.ok = "listening",
		.tail = tls ? " (TLS 1.3, client certificates required)" :
		    " (INSECURE: plain TCP, no authentication)",
		.backlog = 512,
		.cb = server_accept_cb,
	};
	int n;

	server_tls = tls;
	server_accept_fn_cb = accept;
	server_accept_arg = arg;
	if ((server_pause = accept_pause_new(base, NULL, NULL, NULL)) ==
	    NULL) {
		log_warnx("cannot listen: out of memory");
		return -1;
	}
	how.pause = server_pause;
	n = server_listen_tcp(base, cfg->bind, cfg->port, &how, server_lev,
	    SERVER_MAX_LISTENERS);
	if (n == -1)
		return -1;
	server_nlev = n;
	/* time-sync probes beside the TCP ports (probeport.h) */
	if (!cfg->no_udp_probes)
		probeport_start(base, server_lev, n);
	if (server_nlev > 0 && cfg->unix_path != NULL &&
	    server_listen_unix(base, cfg->unix_path) == -1)
		return -1;
	if (server_nlev > 0 && cfg->vsock_port != 0 &&
	    server_listen_vsock(base, cfg->vsock_port) == -1)
		return -1;
	return server_nlev > 0 ? 0 : -1;
}

/* Stop listening. */
void
server_shutdown(void)
{
	int i;

	for (i = 0; i < server_nlev; i++)
		evconnlistener_free(server_lev[i]);
	server_nlev = 0;
	probeport_shutdown();
	/* ours alone (after -u it may stay: the next tdlisten replaces it) */
	if (server_unix_path != NULL)
		unlink(server_unix_path);
	server_unix_path = NULL;
	accept_pause_free(server_pause);
	server_pause = NULL;
}
