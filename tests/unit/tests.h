/* tests.h - the suites of the one Check runner (tests/unit/main.c) and shared helpers.
 *
 * Each test runs in its own process (Check's fork mode) with a timeout. Tests find their
 * inputs through the environment that `make test` sets:
 *   REMAT_TRAIN     absolute path of the remat-train binary under test
 *   REMAT_TESTDATA  absolute path of tests/data (reference data copied from PyTorch)
 *   REMAT_TMP       a scratch directory, emptied by `make test` before the run
 *   REMATD          absolute path of the rematd binary under test
 */
#ifndef TESTS_H
#define TESTS_H

#include <check.h>

Suite *suite_policy(void);
Suite *suite_spec(void);
Suite *suite_st(void);
Suite *suite_tok(void);
Suite *suite_tokjob(void); /* tests/unit/test_tok_job.c */
Suite *suite_text(void);   /* tests/e2e/test_text.c */
Suite *suite_pool(void);   /* tests/e2e/test_pool.c */
Suite *suite_data(void);
Suite *suite_plot(void);
Suite *suite_import(void);
Suite *suite_check(void); /* tests/e2e/test_check.c: rematd's job-start refusing what the start would */
Suite *suite_kernels(void);
Suite *suite_llama_kernels(void); /* tests/unit/test_llama_kernels.c */
Suite *suite_freeze(void);        /* tests/unit/test_freeze.c */
Suite *suite_lora(void);          /* tests/unit/test_lora.c */
Suite *suite_qlora(void);         /* tests/unit/test_qlora.c */
Suite *suite_qlora_daemon(void);  /* tests/e2e/test_qlora_daemon.c */
Suite *suite_q4(void);            /* tests/unit/test_q4.c */
Suite *suite_model(void);
Suite *suite_timing(void);      /* tests/unit/test_timing.c */
Suite *suite_reference(void);
Suite *suite_cli(void);
Suite *suite_daemon(void);
Suite *suite_proto(void);
Suite *suite_protodoc(void); /* tests/unit/test_protodoc.c */
Suite *suite_docstates(void); /* tests/e2e/test_docstates.c */
Suite *suite_client(void);
Suite *suite_e2e(void);
Suite *suite_mpi(void); /* tests/e2e/test_mpi.c: skipped with one line without Open MPI */
Suite *suite_hosts(void); /* tests/e2e/test_hosts.c: skipped with one line without root or
			   * network namespaces */
Suite *suite_shard(void); /* tests/e2e/test_shard.c: skipped as suite_mpi */
Suite *suite_example(void); /* tests/e2e/test_example.c: skipped with one line without
			     * python3 */
Suite *suite_ckpt(void);
Suite *suite_security(void); /* tests/security/test_security.c */
Suite *suite_links(void);    /* tests/security/test_links.c */
Suite *suite_lifecycle(void);
Suite *suite_nolost(void); /* tests/e2e/test_nolost.c */
Suite *suite_systemd(void);
Suite *suite_conns(void); /* tests/e2e/test_conns.c */
Suite *suite_budgetrec(void); /* tests/e2e/test_budget_record.c */
Suite *suite_budget(void); /* tests/e2e/test_budget.c */
Suite *suite_cuda(void); /* tests/cuda/test_cuda.c: GPU tests skip with one line without one */
Suite *suite_cuda_dp(void); /* tests/cuda/test_cuda_dp.c: the same */
#ifdef REMAT_CUDA
Suite *suite_cuda_kernels(void); /* tests/cuda/test_kc.c, built with the CUDA backend only */
Suite *suite_sdpa(void); /* tests/cuda/test_sdpa.c, built with the CUDA backend only */
#endif

/* getenv(name), failing the test with a clear message when it is unset. */
const char *t_env(const char *name);

/* Writes text to REMAT_TMP/<name> and returns the full path (static storage per call site
 * is not shared: the result is malloc'd and left to the process to free). */
char *t_write_tmp(const char *name, const char *text);

/* Runs argv (argv[0] a path) with stdout+stderr captured into *out (malloc'd, NUL
 * terminated); returns the exit status (0..255), or 128+signal when killed. */
int t_run(char *const argv[], char **out);

#endif
