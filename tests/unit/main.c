/* main.c - the one test runner: every suite, one closing line (Check's summary). */
#include "tests.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *t_env(const char *name)
{
	const char *v = getenv(name);
	ck_assert_msg(v && *v, "environment variable %s is not set (run through make test)",
		name);
	return v;
}

char *t_write_tmp(const char *name, const char *text)
{
	const char *dir = t_env("REMAT_TMP");
	size_t n = strlen(dir) + strlen(name) + 2;
	char *path = malloc(n);
	ck_assert_ptr_nonnull(path);
	snprintf(path, n, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	ck_assert_msg(f != NULL, "cannot write %s: %s", path, strerror(errno));
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
	return path;
}

int t_run(char *const argv[], char **out)
{
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close(pipefd[0]);
		close(pipefd[1]);
		execv(argv[0], argv);
		fprintf(stderr, "cannot exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	for (;;) {
		if (len + 1 >= cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
		ssize_t r = read(pipefd[0], buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	close(pipefd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (out)
		*out = buf;
	else
		free(buf);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int main(void)
{
	SRunner *sr = srunner_create(suite_policy());
	srunner_add_suite(sr, suite_spec());
	srunner_add_suite(sr, suite_st());
	srunner_add_suite(sr, suite_tok());
	srunner_add_suite(sr, suite_tokjob());
	srunner_add_suite(sr, suite_text());
	srunner_add_suite(sr, suite_pool());
	srunner_add_suite(sr, suite_data());
	srunner_add_suite(sr, suite_plot());
	srunner_add_suite(sr, suite_import());
	srunner_add_suite(sr, suite_check());
	srunner_add_suite(sr, suite_kernels());
	srunner_add_suite(sr, suite_llama_kernels());
	srunner_add_suite(sr, suite_freeze());
	srunner_add_suite(sr, suite_lora());
	srunner_add_suite(sr, suite_qlora());
	srunner_add_suite(sr, suite_qlora_daemon());
	srunner_add_suite(sr, suite_q4());
	srunner_add_suite(sr, suite_model());
	srunner_add_suite(sr, suite_timing());
	srunner_add_suite(sr, suite_reference());
	srunner_add_suite(sr, suite_cli());
	srunner_add_suite(sr, suite_daemon());
	srunner_add_suite(sr, suite_proto());
	srunner_add_suite(sr, suite_protodoc());
	srunner_add_suite(sr, suite_docstates());
	srunner_add_suite(sr, suite_client());
	srunner_add_suite(sr, suite_e2e());
	srunner_add_suite(sr, suite_mpi());
	srunner_add_suite(sr, suite_hosts());
	srunner_add_suite(sr, suite_shard());
	srunner_add_suite(sr, suite_example());
	srunner_add_suite(sr, suite_ckpt());
	srunner_add_suite(sr, suite_security());
	srunner_add_suite(sr, suite_links());
	srunner_add_suite(sr, suite_lifecycle());
	srunner_add_suite(sr, suite_nolost());
	srunner_add_suite(sr, suite_systemd());
	srunner_add_suite(sr, suite_conns());
	srunner_add_suite(sr, suite_budgetrec());
	srunner_add_suite(sr, suite_budget());
	srunner_add_suite(sr, suite_cuda());
	srunner_add_suite(sr, suite_cuda_dp());
#ifdef REMAT_CUDA
	srunner_add_suite(sr, suite_cuda_kernels());
	srunner_add_suite(sr, suite_sdpa());
#endif
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
