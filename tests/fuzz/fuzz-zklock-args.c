/* zklock's command line: argv as a fuzzed vector (the input split at NUL bytes, at most
 * 64 arguments after argv[0]), parsed as main() parses it, with no configuration file
 * ($ZKLOCK_CONFIG is /dev/null, which is empty) and no $ZKLOCK_SERVERS. Every option,
 * subcommand, number, signal name, interval and the "--" and -c forms go through
 * getopt_long and zklock's own parsers. */
#include "zklock_fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("ZKLOCK_CONFIG", "/dev/null", 1);
	unsetenv("ZKLOCK_SERVERS");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *args[66], *buf;
	args[0] = "zklock";
	int n = fuzz_split(data, size, args + 1, 64, &buf);
	if (n < 0)
		return 0;
	args[n + 1] = NULL;
	fuzz_parse(n + 1, args);
	free(buf);
	return 0;
}
