/*
 * aibox-init: the network.  QEMU's user network (restrict=on) gives the guest
 * one way out, the guestfwd at 10.0.2.100:3128 to the host's proxy.  The
 * guest gets 10.0.2.15/24 on eth0 and no default route, so an address outside
 * 10.0.2.0/24 is unreachable before it even reaches QEMU; no DNS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base.h"
#include "base/err.h"
#include "base/banned.h"

static int set_addr(int s, const char *ifname, unsigned long req, const char *addr)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, ifname, strlen(ifname) + 1);
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, addr, &sin->sin_addr);
	if (ioctl(s, req, &ifr) < 0)
		return -errno;
	return 0;
}

static int link_up(int s, const char *ifname)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, ifname, strlen(ifname) + 1);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return -errno;
	return 0;
}

int net_setup(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int r;

	if (s < 0)
		return error("cannot make a socket: %s", strerror(errno)), -errno;
	/* lo gets 127.0.0.1/8 from the kernel when it comes up. */
	if ((r = link_up(s, "lo")) < 0) {
		error("cannot bring up lo: %s", strerror(-r));
		goto out;
	}
	/* No proxy, no network device: the guest is offline, which is fine. */
	if (if_nametoindex("eth0") == 0) {
		r = 0;
		goto out;
	}
	if ((r = set_addr(s, "eth0", SIOCSIFADDR, "10.0.2.15")) < 0 ||
	    (r = set_addr(s, "eth0", SIOCSIFNETMASK, "255.255.255.0")) < 0 ||
	    (r = link_up(s, "eth0")) < 0)
		error("cannot set up eth0: %s", strerror(-r));
out:
	close(s);
	return r;
}
