/* What every fuzz target shares: a check that stops the run, naming what failed. An
 * abort is what libFuzzer counts as a finding (and what fails the unit suite's replay). */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                       \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s:%d: %s does not hold\n", __FILE__, __LINE__,    \
			        #cond);                                                   \
			abort();                                                          \
		}                                                                         \
	} while (0)

#endif
