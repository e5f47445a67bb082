/*
 * tdrelay.c: a test tool that stands in for a virtual machine's serial
 * port.  It makes a pseudo-terminal in raw mode (a character device, like
 * /dev/virtio-ports/NAME in a guest), writes the path of its device side
 * into PATHFILE, and carries bytes between that device and a TCP
 * connection to HOST:PORT (tdlisten), made when the first byte arrives
 * from the device.  It ends when the device's user closes it; a listener
 * that closes first leaves the device open (what it sent last, DONE,
 * still to be read), as a host whose socket goes leaves a guest's port.
 *
 *	tdrelay [-l SECONDS] HOST PORT PATHFILE
 *
 * HOST unix:PATH connects to the Unix socket PATH instead (tdlisten
 * --unix, as QEMU's chardev does; PORT is not used).
 *
 * -l SECONDS: a host side that comes late, as a QEMU chardev whose
 * listener is not up yet: what the device's user writes in the first
 * SECONDS after its first byte is thrown away, and the device side stays
 * open here so that the user may close and open it again meanwhile (the
 * relay then ends when it is killed).
 *
 * Exit status 0 after a relay that carried bytes both ways, 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

static volatile sig_atomic_t relay_stop;

static void
relay_on_term(int sig)
{
	(void)sig;
	relay_stop = 1;
}

static int
relay_dial(const char *host, const char *port)
{
	struct addrinfo hints, *res, *ai;
	int fd = -1;

	if (strncmp(host, "unix:", 5) == 0) {
		struct sockaddr_un sun;

		memset(&sun, 0, sizeof sun);
		sun.sun_family = AF_UNIX;
		snprintf(sun.sun_path, sizeof sun.sun_path, "%s", host + 5);
		if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) == -1)
			return -1;
		if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0)
			return fd;
		close(fd);
		return -1;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd == -1)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* Write all of len bytes to a blocking fd. */
static int
relay_write(int fd, const char *p, size_t len)
{
	ssize_t w;

	while (len != 0) {
		w = write(fd, p, len);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct termios tio;
	struct pollfd pfd[2];
	char buf[65536], name[256];
	unsigned long long up = 0, down = 0, dropped = 0;
	int master, slave, sock = -1;
	double late = 0, first = -1;
	struct timespec ts;
	struct sigaction sa;
	ssize_t r;
	FILE *fp;

	/* killed (-l): the summary still comes */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = relay_on_term;
	sigaction(SIGTERM, &sa, NULL);
	if (argc == 6 && strcmp(argv[1], "-l") == 0) {
		late = atof(argv[2]);
		argc -= 2;
		argv += 2;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: tdrelay [-l SECONDS] HOST PORT "
		    "PATHFILE\n");
		return 2;
	}
	if (openpty(&master, &slave, name, NULL, NULL) == -1) {
		perror("tdrelay: openpty");
		return 1;
	}
	/* a byte pipe: no echo, no line editing, no CR/LF mapping */
	tcgetattr(slave, &tio);
	cfmakeraw(&tio);
	tcsetattr(slave, TCSANOW, &tio);
	if ((fp = fopen(argv[3], "w")) == NULL ||
	    fprintf(fp, "%s\n", name) < 0 || fclose(fp) != 0) {
		perror("tdrelay: PATHFILE");
		return 1;
	}
	/*
	 * The device side stays open here until its user has written (a
	 * master whose device nobody holds reports a hang-up at once); from
	 * then on, the user closing it ends the relay.
	 */
	pfd[0].fd = master;
	pfd[0].events = POLLIN;
	pfd[1].fd = -1;
	pfd[1].events = POLLIN;
	for (;;) {
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR && !relay_stop)
				continue;
			break;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = read(master, buf, sizeof buf);
			if (r <= 0) {
				/* EIO: its user closed the device */
				break;
			}
			clock_gettime(CLOCK_MONOTONIC, &ts);
			if (first < 0)
				first = ts.tv_sec + ts.tv_nsec / 1e9;
			if (ts.tv_sec + ts.tv_nsec / 1e9 - first < late) {
				dropped += (unsigned long long)r;
				continue;
			}
			if (sock == -1) {
				if (late == 0)
					close(slave);
				if ((sock = relay_dial(argv[1], argv[2])) == -1) {
					perror("tdrelay: connect");
					return 1;
				}
				pfd[1].fd = sock;
			}
			/* after the listener's end, bytes go nowhere */
			if (pfd[1].fd != -1 &&
			    relay_write(sock, buf, (size_t)r) == -1)
				break;
			up += (unsigned long long)r;
		}
		if (pfd[1].fd != -1 && (pfd[1].revents & (POLLIN | POLLHUP |
		    POLLERR))) {
			r = read(sock, buf, sizeof buf);
			if (r <= 0) {
				/*
				 * The listener is done: like a host whose
				 * socket went, the device stays (closing it
				 * would hang it up and throw away what its
				 * user has not read yet, DONE included)
				 * until its user closes it.
				 */
				pfd[1].fd = -1;
				continue;
			}
			if (relay_write(master, buf, (size_t)r) == -1)
				break;
			down += (unsigned long long)r;
		}
	}
	if (sock != -1)
		close(sock);
	close(master);
	printf("relayed %llu bytes up, %llu down (%llu thrown away)\n", up,
	    down, dropped);
	return up > 0 && down > 0 ? 0 : 1;
}
