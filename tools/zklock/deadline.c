/* The deadline a holder's watchdog enforces, for `status` on the same host. */
#include "zklock.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the deadline a holder's watchdog enforces, for `status` on the same host ----
 *
 * A holder writes "<path>\n<loss_ms> <expiry_ms>\n" (CLOCK_MONOTONIC, the same for every
 * process of the host) to <dir>/<pid> while its command runs, and rewrites it as the
 * deadlines move; `status`, run by the same user on the same host, reads it for the
 * holders whose node data names this host. <dir> is $XDG_RUNTIME_DIR/zklock, else
 * /tmp/zklock-<uid>: a folder of the user's own, never followed through a link. */
static bool deadline_dir(char *buf, size_t size, bool create)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n = xdg && *xdg ? snprintf(buf, size, "%s/zklock", xdg)
	                    : snprintf(buf, size, "/tmp/zklock-%ld", (long)getuid());
	if (n < 0 || (size_t)n >= size)
		return false;
	if (create && mkdir(buf, 0700) != 0 && errno != EEXIST)
		return false;
	struct stat sb;
	return lstat(buf, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == getuid();
}

void deadline_publish(const char *path, const zkl_deadlines *d)
{
	char dir[4096], file[4200], tmpf[4300];
	if (!deadline_dir(dir, sizeof dir, true))
		return;
	snprintf(file, sizeof file, "%s/%ld", dir, (long)getpid());
	snprintf(tmpf, sizeof tmpf, "%s.tmp", file);
	FILE *f = fopen(tmpf, "w");
	if (!f)
		return;
	fprintf(f, "%s\n%lld %lld\n", path, (long long)d->loss_ms, (long long)d->expiry_ms);
	if (fclose(f) != 0 || rename(tmpf, file) != 0)
		unlink(tmpf);
}

void deadline_unpublish(void)
{
	char dir[4096], file[4200];
	if (deadline_dir(dir, sizeof dir, false)) {
		snprintf(file, sizeof file, "%s/%ld", dir, (long)getpid());
		unlink(file);
	}
}

/* The loss deadline published by our own holder pid of the lock at path on this host,
 * or 0. */
static int64_t deadline_of(const char *host, long pid, const char *path)
{
	char me[256], dir[4096], file[4200], line[4200];
	if (gethostname(me, sizeof me) != 0 || strcmp(me, host) != 0 || pid <= 0 ||
	    kill((pid_t)pid, 0) != 0 || !deadline_dir(dir, sizeof dir, false))
		return 0;
	snprintf(file, sizeof file, "%s/%ld", dir, pid);
	FILE *f = fopen(file, "r");
	if (!f)
		return 0;
	long long loss = 0, expiry = 0;
	bool ok = fgets(line, sizeof line, f) && (line[strcspn(line, "\n")] = 0, true) &&
	          strcmp(line, path) == 0 && fscanf(f, "%lld %lld", &loss, &expiry) == 2;
	fclose(f);
	return ok ? loss : 0;
}

/* For our own holder on this host: ms until the deadline its watchdog enforces (which
 * may be past, as a negative number), else INT64_MIN. */
int64_t deadline_left(const char *path, const char *host, long pid)
{
	int64_t at = deadline_of(host, pid, path);
	return at > 0 ? at - zkl_monotonic_ms() : INT64_MIN;
}
