/* zklock: run a command while holding a ZooKeeper lock, flock(1) across machines.
 *
 *   zklock [options] PATH -- COMMAND [ARG...]
 *   zklock status [options] PATH
 *   zklock list [options] PREFIX
 *   zklock revoke [options] PATH
 *   zklock forget [options] PATH
 *   zklock check [options] PATH|PREFIX
 *   zklock count [options] PATH N
 *   zklock prune [options] PREFIX
 *   zklock hold [options] PATH --for DUR --reason TEXT
 *   zklock release [options] PATH
 *
 * zklock.h lists the files and what each does. */
#include "zklock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct opts o;
	memset(&o, 0, sizeof o);
	int status = parse_args(argc, argv, &o);
	if (status == 0 && o.help) {
		print_usage();
		status = fflush(stdout) == 0 ? 0 : EXIT_SOFTWARE;
	} else if (status == 0 && o.version) {
		printf("zklock (zklocks) %s\n", zkl_version());
		status = fflush(stdout) == 0 ? 0 : EXIT_SOFTWARE;
	} else if (status == 0 && (status = resolve_servers(&o)) == 0) {
		switch (o.command) {
		case CMD_STATUS:
			status = run_status(&o);
			break;
		case CMD_LIST:
			status = run_list(&o);
			break;
		case CMD_REVOKE:
			status = run_revoke(&o);
			break;
		case CMD_FORGET:
			status = run_forget(&o);
			break;
		case CMD_CHECK:
			status = run_check(&o);
			break;
		case CMD_COUNT:
			status = run_count(&o);
			break;
		case CMD_PRUNE:
			status = run_prune(&o);
			break;
		case CMD_HOLD:
			status = run_hold(&o);
			break;
		case CMD_RELEASE:
			status = run_release(&o);
			break;
		case CMD_RUN:
		default:
			status = run_lock(&o);
			break;
		}
	}
	if (o.command == CMD_CHECK && status == EXIT_USAGE) {
		/* A monitoring plugin says UNKNOWN, on stdout, for a bad command line too. */
		printf("ZKLOCK UNKNOWN - invalid command line (see the message on stderr)\n");
		status = 3;
	}
	free(o.servers_buf);
	config_free();
	return status;
}
