/* Data that other clients write, read back: a shared count (Curator's 4-byte SharedCount),
 * a record (zklock --once-per's run record, "<ms> <host>:<pid>"), a semaphore's recorded
 * limit (a decimal number in its path's data, which zklocks and kazoo record and check),
 * "<host>:<pid>" in a node's data (how `zklock status` finds its own holders), and a
 * revocation request in a held node's data (only "__REVOKE__" is one). The run record is
 * read as --schedule reads it too (slot_record_parse()). The input is the
 * data; each is put in its node on the in-memory ZooKeeper and read as zklocks reads it.
 *
 * What must hold, besides no crash, leak or undefined behaviour: a count is read only
 * from exactly 4 bytes, and then equals them; a record reads back byte for byte; the run
 * record's check never fails on what it reads; a semaphore refuses (ZKL_EINVAL) only a
 * path that records another positive count than its own, and otherwise takes its lease;
 * a record is recent only if its time is before our arrival, and its "by" as zklock
 * prints it has no control byte; the inspection's limit is never negative; the
 * revocation callback runs only for
 * "__REVOKE__". */
#include <stdatomic.h>

#include "fuzz_tree.h"
#include "zklock.h"

static atomic_int revoked;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_tree_open();
	CHECK(fz_create(ft.z, "/R", NULL, ZOO_PERSISTENT, 0, NULL, 0) == ZOK);
	const char *nodes[] = {"/R/count", "/R/rec", "/R/sem"};
	for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++)
		CHECK(fz_create(ft.z, nodes[i], NULL, ZOO_PERSISTENT, 0, NULL, 0) == ZOK);
	return 0;
}

static void on_revoke(zkl_mutex *m, void *data)
{
	(void)m;
	(void)data;
	atomic_fetch_add(&revoked, 1);
}

/* A semaphore of 3 leases on a path whose data is the input. */
static void semaphore_limit(const uint8_t *data, size_t size)
{
	CHECK(fz_put(ft.z, "/R/sem", data, (int)size, 0) == ZOK);
	char text[16] = "";
	bool number = size > 0 && size < 12;
	for (size_t i = 0; number && i < size; i++)
		text[i] = (char)data[i];
	/* A recorded count is digits only (no sign, no space), as zkl_inspect() reads it. */
	for (size_t i = 0; number && i < size; i++)
		number = data[i] >= '0' && data[i] <= '9';
	long v = number ? strtol(text, NULL, 10) : 0;
	number = number && size <= 10 && v > 0 && v <= INT32_MAX;
	zkl_semaphore *s;
	CHECK(zkl_semaphore_new(&s, ft.c, "/R/sem", 3) == 0);
	zkl_lease *lease = NULL;
	int rc = zkl_semaphore_acquire(s, 1, 10000, &lease);
	CHECK(rc == ((number && v != 3) ? ZKL_ECOUNT : 0));
	if (rc == 0) {
		CHECK(zkl_lease_release(lease) == 0);
		zkl_lease_free(lease);
	}
	zkl_semaphore_free(s);
	zkl_inspection *in;
	CHECK(zkl_inspect(ft.c, "/R/sem", 10000, &in) == 0);
	const zkl_lock_info *li = zkl_inspection_lock(in, 0);
	CHECK(li && li->limit >= 0);
	zkl_inspection_free(in);
}

static void revocation(const uint8_t *data, size_t size)
{
	zkl_mutex *m;
	CHECK(zkl_mutex_new(&m, ft.c, "/R/rev") == 0);
	CHECK(zkl_mutex_make_revocable(m, on_revoke, NULL) == 0);
	zkl_lock *l = zkl_mutex_lock(m);
	CHECK(zkl_lock_acquire(l, 10000) == 0);
	char node[ZKL_NODE_MAX];
	CHECK(zkl_lock_node(l, node, sizeof node) > 0);
	atomic_store(&revoked, 0);
	CHECK(fz_put(ft.z, node, data, (int)size, 0) == ZOK);
	/* The data watch's answer has come once a read sent after the change is answered:
	 * the session answers in order. */
	char *back;
	size_t len;
	CHECK(zkl_record_get(ft.c, node, &back, &len, NULL) == 0);
	free(back);
	const bool request = size == 10 && memcmp(data, "__REVOKE__", 10) == 0;
	if (!request)
		CHECK(atomic_load(&revoked) == 0);
	CHECK(zkl_lock_release(l) == 0);
	zkl_mutex_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	/* The shared count. */
	CHECK(fz_put(ft.z, "/R/count", data, (int)size, 0) == ZOK);
	int32_t count = 0;
	int rc = zkl_shared_count_get(ft.c, "/R/count", &count);
	CHECK((rc == 0) == (size == 4));
	if (rc == 0)
		CHECK((uint32_t)count == ((uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 |
		                          (uint32_t)data[2] << 8 | data[3]));
	/* The run record, as a record and as zklock --once-per reads it. */
	CHECK(fz_put(ft.z, "/R/rec", data, (int)size, 0) == ZOK);
	char *back;
	size_t len;
	CHECK(zkl_record_get(ft.c, "/R/rec", &back, &len, NULL) == 0);
	CHECK(len == size && (size == 0 || memcmp(back, data, size) == 0) && back[len] == 0);
	free(back);
	bool recent, exists;
	int64_t last;
	char by[300];
	const int64_t arrival = 1700000000000LL;
	CHECK(once_check(ft.c, "/R/rec", arrival, 3600, &recent, &last, by, sizeof by, NULL,
	                 &exists) == 0);
	CHECK(strlen(by) < sizeof by && exists);
	/* A record from the future (a time after our arrival, a number that overflows) is
	 * never a reason to skip; and "by" is printed, so it holds no control byte. */
	if (recent)
		CHECK(last > 0 && last <= arrival);
	for (const char *p = by; *p; p++)
		CHECK(*p >= 0x20 && *p < 0x7f);
	/* The same as zklock --schedule reads it (the lines after the first): whatever it
	 * says, nothing negative, missed slots in order, and "by" printable. */
	CHECK(zkl_record_get(ft.c, "/R/rec", &back, &len, NULL) == 0);
	struct slot_record sr;
	slot_record_parse(back, 1700000000000LL, &sr);
	free(back);
	CHECK(sr.found && sr.started_ms >= 0 && sr.slot_ms >= 0 && sr.missed >= 0 &&
	      sr.missed_first_ms <= sr.missed_last_ms && sr.finished_ms >= 0);
	CHECK(strlen(sr.by) < sizeof sr.by);
	for (const char *q = sr.by; *q; q++)
		CHECK(*q >= 0x20 && *q < 0x7f);
	for (int k = 0; k <= RUN_KINDS; k++) {
		const struct run_outcome *ro = k < RUN_KINDS ? &sr.runs[k] : &sr.running;
		CHECK(ro->n >= 0 && ro->n <= 255 && ro->slot_ms >= 0 && ro->started_ms >= 0 &&
		      ro->finished_ms >= 0 && strlen(ro->by) < sizeof ro->by);
		for (const char *q = ro->by; *q; q++)
			CHECK(*q >= 0x20 && *q < 0x7f);
	}
	CHECK(slot_record_last(&sr) <= RUN_KINDS);
	/* "<host>:<pid>" in a node's data. */
	char host[256];
	long pid;
	if (host_pid((const char *)data, size, host, sizeof host, &pid))
		CHECK(strlen(host) < sizeof host);
	semaphore_limit(data, size);
	revocation(data, size);
	return 0;
}
