/* zkl_record: a small persistent node of the application's own, beside its locks, read
 * and written through the client's session (no second session needed): the last run of
 * a job, a checkpoint, a note for operators. Records live until deleted
 * (zkl_record_delete(), `zklock forget`); a lock's path is not a place for one (its
 * children are its queue): put it beside, as zklock's --once-per keeps "<lock>.last-run".
 * A record keeps its parent folders for as long as it lives; the folders a write creates
 * are containers, which the server removes once the record is deleted and nothing else is
 * in them (persistent on a server without containers, ZooKeeper 3.4).
 *
 * The functions are thread-safe and block until ZooKeeper answers (or the session is
 * lost): never call them on a thread that runs the client's loop, a callback or the
 * application's loop thread (they then fail at once with ZKL_EDEADLK). */
#ifndef ZKLOCKS_RECORD_H
#define ZKLOCKS_RECORD_H

#include <zklocks/common.h>
#include <zklocks/lock.h>

ZKL_BEGIN_DECLS

/* The longest record, in bytes: ZooKeeper's default jute.maxbuffer less room for the
 * request. */
#define ZKL_RECORD_MAX (1024 * 1024 - 1024)

/* Reads the record at path. On success *data is a malloc'ed copy of its bytes followed
 * by a NUL (not counted in *len), the caller's to free(); *mtime_ms (if not NULL) is when
 * it was last written, in server time (ms since the epoch). Returns 0; ZKL_ENOTHELD if
 * there is no node at path (*data is then NULL and *len 0); ZKL_EINVAL (bad path, NULL
 * data or len); ZKL_EACL; ZKL_ECONNLOSS; ZKL_ECLOSED; ZKL_ENOMEM; ZKL_EZK. */
ZKL_API int zkl_record_get(zkl_client *c, const char *path, char **data, size_t *len,
                           int64_t *mtime_ms);

/* Writes len bytes of data (NULL with len 0 for an empty record) as the record at path,
 * replacing what it held, and creating it (a persistent node), and its missing parents
 * (containers), if needed. Returns 0; ZKL_EINVAL (bad path, len above
 * ZKL_RECORD_MAX); ZKL_EACL; ZKL_ECONNLOSS (the write may or may not have been applied:
 * write again); ZKL_ECLOSED; ZKL_ENOMEM; ZKL_EZK. */
ZKL_API int zkl_record_set(zkl_client *c, const char *path, const void *data, size_t len);

/* zkl_record_set(), guarded by the hold l (<zklocks/lock.h>, zkl_lock_txn()): the
 * record is written (set, or created if missing) only while l's node exists, in one
 * ZooKeeper transaction with the check of that node, so a holder whose lock is gone
 * never writes it. Missing parent folders are made first, unguarded (containers: empty,
 * the server removes them). Returns 0; ZKL_ELOST (l's node or session is gone: the
 * record is not written, and the loss is reported as any is); ZKL_ENOTHELD (l is not
 * held here); ZKL_EINVAL, ZKL_EACL, ZKL_ECONNLOSS (it may or may not have been written),
 * ZKL_EDEADLK, ZKL_ECLOSED, ZKL_ENOMEM, ZKL_EZK, ZKL_ENOTSUP as zkl_lock_txn(). */
ZKL_API int zkl_record_set_guarded(zkl_lock *l, const char *path, const void *data,
                                   size_t len);

/* Deletes the record at path (whatever its version). Returns 0; ZKL_ENOTHELD if there is
 * no node at path; ZKL_EINVAL (bad path, or a node with children: not a record);
 * ZKL_EACL; ZKL_ECONNLOSS (the delete may or may not have been applied: delete again);
 * ZKL_ECLOSED; ZKL_ENOMEM; ZKL_EZK. */
ZKL_API int zkl_record_delete(zkl_client *c, const char *path);

/* Finds the records under prefix ("/" for the whole tree, never /zookeeper) whose names
 * end in suffix (".last-run": zklock's --once-per records), walking the tree as
 * zkl_inspect_prefix() does (one round trip per level; timeout_ms bounds the walk, 0:
 * the session timeout). Nodes named suffix alone do not count. On success *paths is one
 * malloc'ed block, the caller's to free(): *count full paths, sorted, then NULL; none
 * (*count 0) if prefix does not exist. Folders that may not be read (ACL) are left out.
 * Returns 0; ZKL_EINVAL (c, paths or count NULL, suffix NULL, empty or with a '/', a bad
 * prefix, timeout_ms below -1), ZKL_EACL (prefix may not be read), ZKL_ETIMEDOUT,
 * ZKL_ECONNLOSS, ZKL_ELOST, ZKL_EDEADLK (on a thread that runs the client's loop),
 * ZKL_ECLOSED, ZKL_ENOMEM, ZKL_EZK. */
ZKL_API int zkl_record_find(zkl_client *c, const char *prefix, const char *suffix,
                            int timeout_ms, char ***paths, size_t *count);

ZKL_END_DECLS

#endif
