/* The client: one ZooKeeper session, shared by every recipe and thread of a process. */
#ifndef ZKLOCKS_CLIENT_H
#define ZKLOCKS_CLIENT_H

#include <zklocks/common.h>

ZKL_BEGIN_DECLS

/* The C client's handle (<zookeeper/zookeeper.h>), for zkl_client_adopt(). */
typedef struct _zhandle zhandle_t;

/* Connection states, as reported to state listeners and by zkl_client_state(). */
typedef enum zkl_state {
	ZKL_STATE_CONNECTING = 0,  /* not yet connected (only before open returns) */
	ZKL_STATE_CONNECTED = 1,   /* connected, for the first time (before zkl_client_open()
	                            * returns, so listeners never see it) */
	ZKL_STATE_SUSPENDED = 2,   /* the connection dropped; the session may still live and
	                            * locks are still held, but nothing can be checked */
	ZKL_STATE_RECONNECTED = 3, /* connected again: to the same session after SUSPENDED,
	                            * or to a new session after LOST */
	ZKL_STATE_LOST = 4,        /* the session expired, or was given up for lost: ZooKeeper
	                            * answered nothing sent in the last loss_percent of the
	                            * session timeout (connected or not; see
	                            * zkl_client_deadlines()). Every lock held on it was
	                            * reported lost, and the client opens a new session by
	                            * itself. */
	ZKL_STATE_CLOSED = 5,      /* zkl_client_close() was called (what zkl_client_state()
	                            * says then; never reported to listeners) */
} zkl_state;

/* Log levels passed to a zkl_log_fn. */
typedef enum zkl_log_level {
	ZKL_LOG_ERROR = 1,
	ZKL_LOG_WARN = 2,
	ZKL_LOG_INFO = 3,
	ZKL_LOG_DEBUG = 4,
} zkl_log_level;

/* Receives one log message of zklocks itself. Called from any thread, including the
 * C client's threads, so it must be thread-safe and must not call into zklocks. */
typedef void (*zkl_log_fn)(zkl_log_level level, const char *message, void *data);

/* Called on the client's event thread, with no zklocks lock held, once per state change,
 * in order. It may call any zklocks function except zkl_client_close() on this client;
 * an acquire that would wait on this client fails at once with ZKL_EDEADLK (the event
 * thread runs every acquisition, so it cannot also wait for one). The same holds for
 * every callback zklocks calls on the event thread. */
typedef void (*zkl_state_fn)(zkl_client *c, zkl_state state, void *data);

/* Who may touch the nodes a client creates (its lock nodes and the folders it makes). */
typedef enum zkl_acl {
	ZKL_ACL_OPEN = 0,              /* anyone may do anything (ZooKeeper's open ACL) */
	ZKL_ACL_CREATOR_ALL = 1,       /* only clients with the same digest credentials */
	ZKL_ACL_CREATOR_ALL_READ = 2,  /* the same, and anyone may read (list and see holders) */
} zkl_acl;

/* What kind of node a client makes a missing lock folder (and the missing folders above
 * it) with. A folder that exists is used as it is, whatever its kind. */
typedef enum zkl_lock_folders {
	/* Containers, which the server removes once empty; persistent nodes once the server
	 * refuses a container (ZooKeeper 3.4 answers ZUNIMPLEMENTED, some servers that speak
	 * ZooKeeper's protocol ZBADARGUMENTS): decided once per client, and logged once at
	 * ZKL_LOG_WARN. */
	ZKL_FOLDERS_AUTO = 0,
	/* Containers always: on a server without them an acquire whose folder is missing
	 * fails (ZKL_EZK, naming the refusal). */
	ZKL_FOLDERS_CONTAINER = 1,
	/* Persistent nodes always: they stay when empty, until removed (zkl_prune(),
	 * `zklock prune`). */
	ZKL_FOLDERS_PERSISTENT = 2,
} zkl_lock_folders;

/* Supplies the SASL password when ZooKeeper asks for it (every authentication: the first
 * connection and each reconnection), on the C client's I/O thread: it must be
 * thread-safe and must not call into zklocks. Writes the password into buf (size bytes,
 * NUL included) and returns its length, or -1 to fail the authentication (ZKL_EAUTH). */
typedef int (*zkl_sasl_password_fn)(char *buf, size_t size, void *data);

/* The session timeouts a client may ask for, in ms (zkl_client_options). */
#define ZKL_SESSION_TIMEOUT_MIN 100
#define ZKL_SESSION_TIMEOUT_MAX 3600000

typedef struct zkl_client_options {
	/* "host:port[,host:port...][/chroot]": ports 1..65535, an IPv6 address in brackets
	 * ("[::1]:2181"), one chroot after the last server. Default "127.0.0.1:2181". Copied
	 * by open. */
	const char *servers;
	/* Requested session timeout in ms, ZKL_SESSION_TIMEOUT_MIN..ZKL_SESSION_TIMEOUT_MAX
	 * (100 ms to one hour; anything else is ZKL_EINVAL). The server then settles it
	 * within its minSessionTimeout..maxSessionTimeout, by default 2..20 times its
	 * tickTime (4 s..40 s with the default tickTime of 2 s). Default 10000.
	 * zkl_client_session_timeout() gives the negotiated value. */
	int session_timeout_ms;
	/* How long zkl_client_open() waits for a first connection. Default 5000. */
	int connect_timeout_ms;
	/* Digest credentials "user:password" added to every session, or NULL (default). */
	const char *digest_auth;
	/* The ACL of created nodes. Default ZKL_ACL_OPEN; the CREATOR ones need digest_auth,
	 * and then other credentials cannot delete or join our locks (ZKL_EACL). */
	zkl_acl acl;
	/* The kind of the lock folders the client makes. Default ZKL_FOLDERS_AUTO. */
	zkl_lock_folders lock_folders;
	/* zklocks' own log messages at or below log_level go to log (default: none). */
	zkl_log_fn log;
	void *log_data;
	zkl_log_level log_level; /* default ZKL_LOG_WARN */
	/* The C client logs to stderr by itself. true (default) silences it for this client;
	 * false leaves it as the C client's process-wide settings say. */
	bool quiet_zk_log;
	/* false (default): a release sends the delete of its node and returns; the delete
	 * travels ahead of the next request, so the next acquire costs no extra round trip.
	 * If it is not confirmed, it is retried in the background until it succeeds or the
	 * session ends; this client never counts the node as a contender meanwhile, and a
	 * delete that fails for good is logged as an error. When disconnected, a release
	 * waits as with true.
	 * true: a release waits until the delete is confirmed (returns 0), or until the
	 * session is gone or given up for lost (returns ZKL_ELOST; the node is then deleted
	 * in the background if the session turns out to be alive).
	 * Either way, a release made on the client's loop (in a callback) never waits: it
	 * sends the delete, or leaves it to the background while disconnected. */
	bool confirm_release;
	/* When the session is given up for lost: once ZooKeeper has answered nothing sent in
	 * the last loss_percent % of the negotiated session timeout, whether the C client
	 * still calls the connection up or not (a client cut off one way still hears the
	 * server). The server cannot expire the session, and so let another client hold our
	 * locks, before the whole timeout has passed since that send: the rest of the
	 * timeout is the holder's time to stop (zkl_client_deadlines()). Default 90 (a 10 s
	 * session: lost after 9 s of silence, 1 s to stop). Lower values give the holder
	 * more time to stop but may give a session up while the client moves to another
	 * server of the ensemble (it notices silence after 2/3 of the timeout); 100 leaves no
	 * time at all. 50..100; anything else is ZKL_EINVAL. */
	int loss_percent;
	/* The most bytes a server reads in one request: the servers' jute.maxbuffer (a
	 * request's length, not counting its 4-byte length field). A server closes the
	 * connection of a longer one, so a create or write that would not fit (its path,
	 * data and ACL) is refused before it is sent, with ZKL_EINVAL. Default 1048575,
	 * ZooKeeper's default; set it to the servers' jute.maxbuffer if they have another.
	 * At least 1024. */
	int max_request;
	/* false (default): the client runs its loop on a thread of its own, the event thread,
	 * where every callback runs. true: no thread is started; the application runs the
	 * loop in its own event loop (epoll, libuv, libevent...) with zkl_client_loop_fd(),
	 * zkl_client_loop_timeout() and zkl_client_process(), and every callback runs inside
	 * zkl_client_process(), on the application's thread. */
	bool external_loop;

	/* Secure connections (zkl_client(3), "SECURE CONNECTIONS"). They need a C client
	 * built with OpenSSL and Cyrus SASL (scripts/build-secure-client; Debian's
	 * libzookeeper-mt has neither): zkl_features() says what this build has, and asking
	 * for what it lacks fails at zkl_client_open() with ZKL_ENOTSUP, never in plaintext.
	 * TLS and SASL do not go together (the C client opens a session with one or the
	 * other); digest_auth goes with either. Strings are copied by open; files are read
	 * at each connection. */

	/* TLS: a PEM file of the CA certificates that sign the servers' certificates. Set,
	 * it turns TLS on; the servers must be their secureClientPort. The C client does
	 * not check the certificate's host name: trust only a CA that signs your servers. */
	const char *tls_ca;
	/* A client certificate (PEM, with its chain) and its private key (PEM), both or
	 * neither: for servers that ask for one (ssl.clientAuth). tls_key_password unlocks
	 * an encrypted key. None of the three may contain a comma. */
	const char *tls_cert;
	const char *tls_key;
	const char *tls_key_password;

	/* SASL: the mechanism ("DIGEST-MD5"; "GSSAPI" where the Cyrus modules have it). Set,
	 * it turns SASL on. */
	const char *sasl_mechanism;
	const char *sasl_user;          /* the user (DIGEST-MD5) */
	/* The password: sasl_password, else the first line of sasl_password_file, else what
	 * sasl_password_fn gives (with sasl_password_data). DIGEST-MD5 needs one of them. */
	const char *sasl_password;
	const char *sasl_password_file;
	zkl_sasl_password_fn sasl_password_fn;
	void *sasl_password_data;
	/* The service and host names the server's SASL identity is made of. Defaults
	 * "zookeeper" and "zk-sasl-md5" (what a ZooKeeper server's DIGEST-MD5 answers to);
	 * GSSAPI needs the server's host name, as in its Kerberos principal. */
	const char *sasl_service;
	const char *sasl_host;
} zkl_client_options;

/* What the ZooKeeper C client under this build of zklocks can do. */
enum zkl_feature {
	ZKL_FEATURE_TLS = 1,  /* zookeeper_init_ssl(): the tls_* options */
	ZKL_FEATURE_SASL = 2, /* zookeeper_init_sasl(): the sasl_* options */
};

/* The ZKL_FEATURE_* bits of this build. Thread-safe. */
ZKL_API unsigned zkl_features(void);

/* Fills o with the defaults above. */
ZKL_API void zkl_client_options_init(zkl_client_options *o);

/* Connects and waits until the session is established or o->connect_timeout_ms passes.
 * On success *out is the caller's, to be closed with zkl_client_close(). Returns 0,
 * ZKL_EINVAL (bad options), ZKL_ENOTSUP (TLS or SASL asked of a build without them:
 * zkl_last_error() says how to get one), ZKL_ECONNECT (no session; zkl_last_error() names
 * the cause: every server refused the connection, nothing listens (it fails within
 * about half a second); a port accepted connections but never answered (after
 * connect_timeout_ms: a port that takes only TLS stays silent to a plaintext client);
 * no answer in the time waited; over TLS the handshake's likely causes),
 * ZKL_EAUTH (credentials refused, SASL's included) or ZKL_ENOMEM. o may be NULL for
 * defaults. */
ZKL_API int zkl_client_open(zkl_client **out, const zkl_client_options *o);

/* The application's own session. A service that has a ZooKeeper handle of its own (its
 * registration, its leadership) puts its locks on that session, so that they live and die
 * with it:
 *
 *   - zkl_client_adopt() makes a client on zh, a handle the application opened with
 *     zookeeper_init() (connected, or connecting). Of o only the ACL, logging,
 *     confirm_release, loss_percent, connect_timeout_ms and external_loop count: the
 *     handle has its servers, timeout and credentials already (add digest credentials to
 *     it yourself if you ask for a creator-only ACL; the tls_* and sasl_* options must be
 *     unset, or ZKL_EINVAL). The client never closes zh.
 *   - zklocks' watcher goes in front of the application's (zoo_set_watcher()), which
 *     still gets every event it got before, with its own context; zkl_client_close()
 *     puts it back and takes zklocks' node watches off the handle. Do not call
 *     zoo_set_watcher() on zh while the client uses it.
 *   - When the session expires, every lock is reported lost as with a client's own
 *     session, and the client waits for the next handle: the application opens one and
 *     passes it to zkl_client_handover() (say, when its state listener hears
 *     ZKL_STATE_LOST); acquisitions meanwhile wait, as if disconnected. The expired
 *     handle is the application's to close, after the handover.
 *   - When the loss rule (loss_percent) gives the session up while the server may still
 *     keep it, the locks are reported lost and their nodes deleted in the background; the
 *     session counts again once ZooKeeper answers.
 * zkl_client_adopt() returns as zkl_client_open() does (ZKL_EINVAL for a NULL zh, or one
 * that another client has adopted and not closed: one client per handle). */
ZKL_API int zkl_client_adopt(zkl_client **out, zhandle_t *zh, const zkl_client_options *o);

/* Hands the application's next handle to a client of zkl_client_adopt() whose session
 * expired. Returns 0; ZKL_EBUSY if the current session has not expired; ZKL_EINVAL (NULL
 * arguments, a client with sessions of its own, the handle it has already); ZKL_ECLOSED. */
ZKL_API int zkl_client_handover(zkl_client *c, zhandle_t *zh);

/* Ends the session (its ephemeral nodes go at once) and frees the client; an adopted
 * session goes on: close first waits, at most the session timeout, for the deletes of
 * zklocks' nodes still under way, and leaves the handle to the application. Every recipe
 * handle made on it must be freed first. NULL is a no-op. Refused, logged as an error
 * and with its detail in zkl_last_error(): a close inside a callback of c does nothing;
 * a close while handles made on c are open is put off, and the free of the last of them
 * closes c (except in a callback of c or a selector's function: c then stays open). */
ZKL_API void zkl_client_close(zkl_client *c);

/* The application's loop (external_loop). The contract, as in libcurl's multi interface:
 *
 *   - Poll zkl_client_loop_fd() for reading, with the timeout zkl_client_loop_timeout()
 *     gives, and call zkl_client_process() when the descriptor is readable or the
 *     timeout has passed. Ask for the timeout again after every call: it changes.
 *   - zkl_client_process() runs what is due (session events, acquisitions, timers,
 *     background deletes) and every callback: acquire, lost, state, revocation. It never
 *     blocks on the network. Call it from one thread at a time (the loop's).
 *   - The timers include the loss rule (see loss_percent): a holder is told its lock is
 *     lost at zkl_client_deadlines()'s loss_ms only if zkl_client_process() is called
 *     then. A loop that stalls delays the news; it cannot let two holders in, since the
 *     session ends on the server's clock, but the holder may learn late.
 *   - Blocking calls (zkl_lock_acquire(), ...) work from other threads while the loop
 *     runs; from the loop's own thread they would wait for themselves, and fail at once
 *     with ZKL_EDEADLK, as they do in any callback.
 *   - zkl_client_open() runs the loop itself until the session is up. zkl_client_close(),
 *     called on the loop's thread outside zkl_client_process(), ends what is under way
 *     and runs the last callbacks (ZKL_ECANCELED, ZKL_ECLOSED) before it returns; stop
 *     polling the descriptor before, since close closes it. */

/* The descriptor to poll for reading: readable when zkl_client_process() has work. Owned
 * by the client. Returns it, or ZKL_EINVAL (c NULL, or c runs its own loop thread). */
ZKL_API int zkl_client_loop_fd(zkl_client *c);

/* Milliseconds until zkl_client_process() must run even if the descriptor stays quiet:
 * 0 at once, -1 no timer (wait for the descriptor alone). ZKL_EINVAL as above. */
ZKL_API int zkl_client_loop_timeout(zkl_client *c);

/* Runs the loop once: what is due, and every callback it leads to. Returns 0,
 * ZKL_EINVAL as above, ZKL_EDEADLK when called from a callback of c, ZKL_EBUSY at once
 * (without waiting) when another thread is inside it, ZKL_ECLOSED once c is closing. */
ZKL_API int zkl_client_process(zkl_client *c);

/* The current state. Thread-safe. */
ZKL_API zkl_state zkl_client_state(const zkl_client *c);

/* What a client's acquisitions have done since it was opened: for monitoring, and to
 * check that a queue wakes only the waiter whose turn came (a lock's node that goes
 * wakes the one waiter behind it, not the whole queue). */
/* How many buckets each histogram of zkl_client_stats has. */
#define ZKL_STATS_BUCKETS 12

typedef struct zkl_client_stats {
	uint64_t acquisitions; /* started, blocking or asynchronous, of every kind */
	uint64_t granted;      /* of those, the ones that ended holding */
	uint64_t wakes;        /* times a waiting acquisition was woken because what it
	                        * waited for changed: the node it watched went or changed,
	                        * or a semaphore's shared count moved */
	uint64_t listings;     /* listings of a queue sent by acquisitions */
	/* How long acquires waited before their grant, and how long holds were held
	 * (released or lost), of the kinds the observer is told of: counts per bucket,
	 * bucket i holding the times of at most zkl_stats_bucket_ms(i) ms and more than
	 * bucket i-1's bound; the last bucket has no bound. Sums in ms. */
	uint64_t wait_hist[ZKL_STATS_BUCKETS];
	uint64_t wait_sum_ms;
	uint64_t hold_hist[ZKL_STATS_BUCKETS];
	uint64_t hold_sum_ms;
	/* What the session's liveness costs the ensemble (GUIDE.md, "What zklocks costs an
	 * ensemble"): writes sent only to prove the session, each a transaction the
	 * ensemble commits (a heartbeat's check while something is held or an acquisition
	 * is next in line, and a turn's check when the last committed write is older than
	 * a third of the session timeout); and heartbeat syncs, sent while nothing is held
	 * or awaited, which the ensemble does not log. A session that only waits far back
	 * in queues adds to neither. */
	uint64_t proof_writes;
	uint64_t heartbeat_syncs;
} zkl_client_stats;

/* The upper bound, in ms, of bucket i of zkl_client_stats' histograms (1, 5, 10, 50,
 * 100, 500, 1000, 5000, 10000, 60000, 300000), or INT64_MAX for the last one and for i
 * out of range. */
ZKL_API int64_t zkl_stats_bucket_ms(int i);

/* Copies c's counters into *out, whose size is size (sizeof *out where the caller was
 * built: fields a newer library adds past it are left out). Thread-safe; the counters
 * are read one by one, not as one snapshot. Returns 0, or ZKL_EINVAL (c or out NULL,
 * size too small for the first field). */
ZKL_API int zkl_client_get_stats(const zkl_client *c, zkl_client_stats *out, size_t size);

/* ---- the observer: every lock event of a client, with its times ---- */

/* What happened to one acquisition or hold. */
typedef enum zkl_lock_event_type {
	ZKL_EVENT_QUEUED = 1, /* an acquire found others ahead and waits (ahead says how
	                       * many); told once per acquire */
	ZKL_EVENT_GRANTED,    /* the acquire holds (wait_ms) */
	ZKL_EVENT_RELEASED,   /* the hold was released (hold_ms) */
	ZKL_EVENT_LOST,       /* the hold was lost: its session ended or was given up, or
	                       * its node was deleted (hold_ms) */
	ZKL_EVENT_REVOKED,    /* someone asked the holder to release (zkl_revoke()) */
	ZKL_EVENT_TIMED_OUT,  /* the acquire ran out of time (wait_ms) */
	ZKL_EVENT_CANCELED,   /* the acquire was canceled, or its handle freed (wait_ms) */
} zkl_lock_event_type;

/* One event. Pointers are valid during the call only. */
typedef struct zkl_lock_event {
	zkl_lock_event_type type;
	const char *kind;  /* "mutex", "read", "write", "semaphore", "semaphore-mutex",
	                    * "leader", ... (zkl_lock_kind()) */
	const char *path;  /* the folder the node queues in: the lock's path (a semaphore's
	                    * leases queue in "<path>/leases") */
	const char *node;  /* the full path of our node, or NULL if it had none */
	int64_t token;     /* the fencing token of the hold (its node's czxid), or 0 */
	int ahead;         /* QUEUED: how many nodes were ahead of ours; else 0 */
	int64_t at_ms;     /* when it happened, on zkl_monotonic_ms()'s clock */
	int64_t wait_ms;   /* GRANTED, TIMED_OUT, CANCELED: since the acquire began */
	int64_t hold_ms;   /* RELEASED, LOST, REVOKED: since the grant */
} zkl_lock_event;

/* Told of every lock event of the client, in order, on the client's event thread (or
 * in zkl_client_process() with external_loop) with no lock of zklocks held. It must
 * return soon and must not wait for the server: what it tells a metrics library or a
 * log is what it is for. */
typedef void (*zkl_observer_fn)(zkl_client *c, const zkl_lock_event *ev, void *data);

/* Sets the client's observer (one per client; NULL fn removes it). When it returns, an
 * observer replaced is not running and will not run again, unless called from the
 * observer itself. None is kept while no observer is set. Returns 0, or ZKL_EINVAL if
 * c is NULL. */
ZKL_API int zkl_client_set_observer(zkl_client *c, zkl_observer_fn fn, void *data);

/* A static name for an event type ("queued", "granted", ...; "unknown" for others). */
ZKL_API const char *zkl_lock_event_name(zkl_lock_event_type type);

/* A static name for a state ("connected", "suspended", ...). */
ZKL_API const char *zkl_state_name(zkl_state s);

/* Adds a state listener. The same (fn, data) pair may be added once. Returns 0,
 * ZKL_EINVAL or ZKL_ENOMEM. */
ZKL_API int zkl_client_add_listener(zkl_client *c, zkl_state_fn fn, void *data);

/* Removes a listener added with the same (fn, data). When it returns, the listener is not
 * running and will not run again, unless called from that listener itself. Returns 0 or
 * ZKL_EINVAL if there was no such listener. */
ZKL_API int zkl_client_remove_listener(zkl_client *c, zkl_state_fn fn, void *data);

/* The current session id (0 while disconnected) and the negotiated session timeout in
 * ms. Thread-safe. */
ZKL_API int64_t zkl_client_session_id(const zkl_client *c);
ZKL_API int zkl_client_session_timeout(const zkl_client *c);

/* The bounds of the current session's life, as this client knows them. Every time is
 * on zkl_monotonic_ms()'s clock. */
typedef struct zkl_deadlines {
	int64_t session_id; /* the session they are for; 0 (and the rest 0) while the
	                     * current session has answered nothing yet */
	int64_t loss_ms;    /* when the client reports the session's locks lost, unless
	                     * ZooKeeper commits a write sent later: the send time T of
	                     * the last write it committed on the session + loss_percent
	                     * of the session timeout */
	int64_t expiry_ms;  /* the earliest moment the server may expire the session, and
	                     * so another client hold our locks: T + the session timeout */
} zkl_deadlines;

/* Fills *out with the current session's deadlines. Heartbeats (every sixth of the
 * session timeout, while a lock is held or an acquisition is next in line) push them
 * forward while the session is healthy. A holder doing work that must not overlap
 * another holder's can read them as it goes and stop by loss_ms; a lost callback fired
 * by the loss rule runs at loss_ms, and the work must have stopped by expiry_ms (read
 * the deadlines before the loss: after it they are the new session's). Thread-safe.
 * Returns 0, or ZKL_EINVAL if c or out is NULL. */
ZKL_API int zkl_client_deadlines(const zkl_client *c, zkl_deadlines *out);

/* Milliseconds on CLOCK_MONOTONIC, the clock of every zklocks deadline. */
ZKL_API int64_t zkl_monotonic_ms(void);

/* The library version, "MAJOR.MINOR.PATCH", the same as ZKL_VERSION_STRING at build. */
ZKL_API const char *zkl_version(void);

ZKL_END_DECLS

#endif
