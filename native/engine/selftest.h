/* selftest.h - `kite selftest`: unit checks, one line each, closing "N passed, M failed". */
#ifndef KITE_SELFTEST_H
#define KITE_SELFTEST_H

/* Returns the number of failed checks. model_path may be NULL. */
int kt_selftest(const char *model_path);

#endif
