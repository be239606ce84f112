/* Inspection of an arbitrary tree: names (any bytes but '/', NUL and newline; Curator's,
 * kazoo's, sequential or not), data, owners (ephemeral or not), creation times, child
 * versions near the wrap of sequence numbers, and nodes that vanish between the listing
 * that found them and the read of their data. The tree is built on the in-memory
 * ZooKeeper under /L from the input, then read by zkl_inspect() at its first eight
 * folders, by zkl_inspect_prefix(), by a dry run of zkl_prune(), and printed as `zklock
 * status` prints it, in text and JSON.
 *
 * Input: records of [parent][flags][name length][name][data length][data][ctime: 2]
 * (parent: an index among the folders made so far, 0 the root /L; flags: bit 0
 * ephemeral, bit 1 sequential, bit 2 vanishes when read, bits 3-4 the name's form: as
 * given, Curator's "_c_<uuid>-" before it, kazoo's "<hex>__" before it, or a marker
 * from the table after it; bit 5: the parent's child version set from 4 more bytes first).
 *
 * What must hold, besides no crash, leak or undefined behaviour: every call returns 0
 * (the tree is readable, and nothing vanishing is an error), each lock's nodes lie within
 * the inspection, its holders and waiting add up to its count, every node's data is
 * NUL-terminated at its length. */
#include "fuzz_tree.h"
#include "zklock.h"

enum { MAX_NODES = 96 };

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_tree_open();
	devnull = fopen("/dev/null", "w");
	CHECK(devnull);
	return 0;
}

static const char *const markers[] = {"lock-", "__READ__", "__WRIT__", "lease-", "latch-",
                                      "__lock__", "__rlock__", "leases", "locks"};

static void check_inspection(const zkl_inspection *in)
{
	size_t total = zkl_inspection_nodes(in);
	for (size_t i = 0; i < zkl_inspection_locks(in); i++) {
		const zkl_lock_info *li = zkl_inspection_lock(in, i);
		CHECK(li && li->first + li->count <= total);
		CHECK(li->holders + li->waiting == li->count);
		for (size_t k = 0; k < li->count; k++) {
			const zkl_node_info *n = zkl_inspection_node(in, li->first + k);
			CHECK(n && n->data && n->data[n->data_len] == 0 && n->path && n->name);
		}
		print_lock_text(devnull, in, li);
		print_lock_json(devnull, in, li, NULL);
	}
	CHECK(zkl_inspection_node(in, total) == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char folders[MAX_NODES + 1][640];
	int nfolders = 1;
	strcpy(folders[0], "/L");
	CHECK(fz_create(ft.z, "/L", NULL, ZOO_PERSISTENT, 0, NULL, 0) == ZOK);
	size_t at = 0;
	for (int made = 0; made < MAX_NODES && at + 3 <= size; made++) {
		const char *parent = folders[data[at] % nfolders];
		uint8_t flags = data[at + 1];
		size_t nlen = data[at + 2] % 48;
		at += 3;
		if (flags & 0x20 && at + 4 <= size) {
			int32_t cv = (int32_t)((uint32_t)data[at] << 24 | (uint32_t)data[at + 1] << 16 |
			                       (uint32_t)data[at + 2] << 8 | data[at + 3]);
			fz_set_cversion(ft.z, parent, cv);
			at += 4;
		}
		char name[64] = "";
		size_t k = 0;
		for (; k < nlen && at < size; k++, at++)
			name[k] = (data[at] == '/' || data[at] == 0 || data[at] == '\n') ? '_'
			                                                                   : (char)data[at];
		name[k] = 0;
		if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			strcpy(name, "n");
		char full[640];
		const int form = (flags >> 3) & 3;
		int len = snprintf(full, sizeof full, "%s/%s%s%s", parent,
		                   form == 1 ? "_c_0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f0-"
		                   : form == 2 ? "0f1e2d3c4b5a49788695a4b3c2d1e0f0__" : "",
		                   name, form == 3 ? markers[nlen % 9] : "");
		if (len >= 500)
			break;
		const bool eph = flags & 1, seq = flags & 2;
		int mode = eph ? (seq ? ZOO_EPHEMERAL_SEQUENTIAL : ZOO_EPHEMERAL)
		               : (seq ? ZOO_PERSISTENT_SEQUENTIAL : ZOO_PERSISTENT);
		size_t dlen = at < size ? data[at++] % 64 : 0;
		if (dlen > size - at)
			dlen = size - at;
		const uint8_t *d = data + at;
		at += dlen;
		int64_t ctime = at + 2 <= size ? (int64_t)(int8_t)data[at] * ((int64_t)1 << 40) + data[at + 1] : 0;
		at += 2;
		char created[640];
		if (fz_create(ft.z, full, NULL, mode, eph ? ft.peer : 0, created,
		              sizeof created) != ZOK)
			continue;
		fz_put(ft.z, created, d, (int)dlen, ctime);
		if (!eph && nfolders <= MAX_NODES)
			snprintf(folders[nfolders++], sizeof folders[0], "%s", created);
		if (flags & 4 && ft.nvanish < 64)
			snprintf(ft.vanish[ft.nvanish++], sizeof ft.vanish[0], "%s", created);
	}

	zkl_inspection *in;
	for (int i = 0; i < nfolders && i < 8; i++) {
		if (!fz_stat(ft.z, folders[i], NULL))
			continue;
		/* A lock path with a control character or bytes that are not UTF-8 is refused
		 * (it is the caller's input, and no recipe makes one); under a prefix such a
		 * folder is walked through. Any other path is read. */
		bool ascii = true;
		for (const char *p = folders[i]; *p; p++)
			ascii &= (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f;
		int rc = zkl_inspect(ft.c, folders[i], 10000, &in);
		if (rc == ZKL_EINVAL && !ascii)
			continue;
		CHECK_OK(rc);
		check_inspection(in);
		zkl_inspection_free(in);
	}
	CHECK_OK(zkl_inspect_prefix(ft.c, "/L", 10000, &in));
	check_inspection(in);
	zkl_inspection_free(in);
	int pruned = zkl_prune(ft.c, "/L", true, 10000, NULL, NULL);
	if (pruned < 0) {
		fprintf(stderr, "zkl_prune: %s: %s\n", zkl_errname(pruned), zkl_last_error());
		abort();
	}
	fuzz_tree_clear("/L");
	return 0;
}
