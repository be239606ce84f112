/* The loop's descriptor in the simulation (README.md, "What it models").
 *
 * A client in external_loop mode makes an eventfd and writes it whenever its loop has
 * work; zkl_client_process() reads it empty. In the simulation nothing polls it (the
 * scheduler asks zkl_client_loop_timeout()), and those two system calls per wake were a
 * third of the simulator's time. The simulator keeps the counter of such a descriptor
 * itself: eventfd() still makes a real one (so its number, and close(), are real), and
 * read() and write() on it act on the counter in memory as the kernel would on a
 * non-blocking eventfd. Every other descriptor goes to the kernel. No header of the C
 * library is included for these names: its inline wrappers of read() and write() would
 * be in the way. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>

long syscall(long number, ...);
int eventfd(unsigned int count, int flags);
ssize_t read(int fd, void *buf, size_t n);
ssize_t write(int fd, const void *buf, size_t n);
int close(int fd);

#define NFD 4096
#define EFD_NONBLOCK_FLAG 04000 /* O_NONBLOCK, as <sys/eventfd.h> has it */

static unsigned char kept[NFD];   /* the counter of fd is kept here */
static uint64_t counter[NFD];

int eventfd(unsigned int count, int flags)
{
	int fd = (int)syscall(SYS_eventfd2, count, flags);
	if (fd >= 0 && fd < NFD && (flags & EFD_NONBLOCK_FLAG)) {
		kept[fd] = 1;
		counter[fd] = count;
	}
	return fd;
}

ssize_t read(int fd, void *buf, size_t n)
{
	if (fd < 0 || fd >= NFD || !kept[fd])
		return (ssize_t)syscall(SYS_read, fd, buf, n);
	if (n < sizeof(uint64_t)) {
		errno = EINVAL;
		return -1;
	}
	if (counter[fd] == 0) {
		errno = EAGAIN;
		return -1;
	}
	memcpy(buf, &counter[fd], sizeof(uint64_t));
	counter[fd] = 0;
	return (ssize_t)sizeof(uint64_t);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	if (fd < 0 || fd >= NFD || !kept[fd])
		return (ssize_t)syscall(SYS_write, fd, buf, n);
	uint64_t v;
	if (n < sizeof v) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&v, buf, sizeof v);
	if (v == UINT64_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (v > UINT64_MAX - 1 - counter[fd]) {
		errno = EAGAIN;
		return -1;
	}
	counter[fd] += v;
	return (ssize_t)sizeof v;
}

/* Whether a kept descriptor is readable (its counter is not 0): the application's
 * poll() would return it. */
int sim_loopfd_readable(int fd);
int sim_loopfd_readable(int fd)
{
	return fd >= 0 && fd < NFD && kept[fd] && counter[fd] != 0;
}

int close(int fd)
{
	if (fd >= 0 && fd < NFD)
		kept[fd] = 0;
	return (int)syscall(SYS_close, fd);
}
