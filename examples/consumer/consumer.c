/* consumer: the smallest program that uses zklocks from outside its source tree. It is
 * built the three ways a project uses the library (see README.md): as a meson
 * subproject, with CMake through pkg-config, and with make through pkg-config.
 *
 *   consumer                 print the version of the headers and of the library
 *   consumer SERVERS PATH    take the lock PATH once (waiting at most 10 s), print its
 *                            fencing token, release it
 *
 * Exits 0 on success, 1 on failure (with zklocks' reason on stderr). */
#include <stdio.h>
#include <string.h>

#include <zklocks/zklocks.h>

int main(int argc, char **argv)
{
	printf("zklocks headers %s, library %s\n", ZKL_VERSION_STRING, zkl_version());
	if (strcmp(ZKL_VERSION_STRING, zkl_version()) != 0) {
		fprintf(stderr, "consumer: built against zklocks %s but running with %s\n",
		        ZKL_VERSION_STRING, zkl_version());
		return 1;
	}
	if (argc != 1 && argc != 3) {
		fprintf(stderr, "usage: consumer [SERVERS PATH]\n");
		return 1;
	}
	if (argc == 1)
		return 0;

	zkl_client_options o;
	zkl_client_options_init(&o);
	o.servers = argv[1];
	zkl_client *c;
	int rc = zkl_client_open(&c, &o);
	if (rc != 0) {
		fprintf(stderr, "consumer: %s: %s\n", zkl_strerror(rc), zkl_last_error());
		return 1;
	}
	zkl_mutex *m = NULL;
	rc = zkl_mutex_new(&m, c, argv[2]);
	zkl_lock *l = zkl_mutex_lock(m);
	if (rc == 0)
		rc = zkl_lock_acquire(l, 10000);
	if (rc == 0) {
		printf("holding %s, fencing token %lld\n", argv[2], (long long)zkl_lock_token(l));
		rc = zkl_lock_release(l);
	}
	if (rc != 0)
		fprintf(stderr, "consumer: %s: %s\n", zkl_strerror(rc), zkl_last_error());
	zkl_mutex_free(m);
	zkl_client_close(c);
	return rc == 0 ? 0 : 1;
}
