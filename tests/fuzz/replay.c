/* Runs every file of the corpus folders (or files) given on the command line through a
 * fuzz target's entry point, once each, with no fuzzing: the unit suite's way to keep a
 * crash that was found and fixed from coming back (tests/fuzz/meson.build). Exits 1 if
 * a folder holds no input at all, so that a lost corpus does not pass unnoticed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
		len += got;
		if (len == cap) {
			uint8_t *more = realloc(buf, cap *= 2);
			if (!more) {
				free(buf);
				buf = NULL;
			}
			buf = more;
		}
	}
	fclose(f);
	if (!buf) {
		fprintf(stderr, "%s: out of memory\n", path);
		return -1;
	}
	/* A copy of exactly its size, so that AddressSanitizer sees reads past the end. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	int failed = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed |= replay_file(argv[i]) != 0;
			continue;
		}
		struct dirent **names;
		int n = scandir(argv[i], &names, NULL, alphasort);
		if (n < 0) {
			perror(argv[i]);
			return 1;
		}
		int ran = 0;
		for (int k = 0; k < n; k++) {
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
			if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				failed |= replay_file(path) != 0;
				ran++;
			}
			free(names[k]);
		}
		free(names);
		printf("replayed %d input%s of %s\n", ran, ran == 1 ? "" : "s", argv[i]);
		if (ran == 0) {
			fprintf(stderr, "%s holds no input\n", argv[i]);
			failed = 1;
		}
	}
	return failed;
}
