/* eng_import_from.c - what model.init_from names, whichever it is: a model directory or an
 * llm.c file (eng_import.c reads those), or a directory of LoRA adapters (eng_peft.c), whose
 * base is read first; and remat-train --export-llmc. The one place that chooses between
 * the two, above both.
 */
#include "eng_import.h"

#include <string.h>

#include "eng_llmc.h"
#include "eng_peft.h"

#define PATH_MAX_LEN 4096 /* longest init_from path joined with a file name here */

int eng_import_read_config(const char *from, eng_config *cfg, eng_err *err)
{
	char base[PATH_MAX_LEN + 32];
	if (eng_import_exists(from, err) < 0)
		return -1;
	if (!eng_import_is_file(from) && eng_peft_is_adapter(from))
		return eng_peft_read_config(from, cfg, base, sizeof base, err);
	return eng_import_base_config(from, cfg, err);
}

int eng_import_load(eng_model *m, const char *from, eng_err *err)
{
	char base[PATH_MAX_LEN + 32];
	eng_config c;
	/* adapters: the base's weights from its directory, then theirs */
	if (!eng_import_is_file(from) && eng_peft_is_adapter(from))
		return eng_peft_read_config(from, &c, base, sizeof base, err) < 0 ||
				eng_import_base_load(m, base, err) < 0 ||
				eng_peft_load(m, from, err) < 0
			? -1 : 0;
	return eng_import_base_load(m, from, err);
}

int eng_import_check(const char *from, const eng_config *cfg, eng_err *err)
{
	char base[PATH_MAX_LEN + 32];
	eng_config c;
	/* adapters: their base's files (the adapters' own are eng_peft_load's to check) */
	int adapter = !eng_import_is_file(from) && eng_peft_is_adapter(from);
	if (adapter && eng_peft_read_config(from, &c, base, sizeof base, err) < 0)
		return -1;
	return eng_import_base_check(adapter ? base : from, cfg, err);
}

int eng_export_llmc(const char *from, const char *out, int version, eng_err *err)
{
	eng_config cfg;
	eng_model m;
	memset(&m, 0, sizeof m);
	int rc = eng_import_read_config(from, &cfg, err);
	/* an adapter of a quantized run: its base as the files hold it */
	eng_config_no_quant(&cfg);
	if (rc == 0 && (eng_model_init(&m, &cfg, 1, 1, 0, err) < 0 ||
			       eng_import_load(&m, from, err) < 0 ||
			       eng_model_save_llmc(&m, out, version, err) < 0))
		rc = -1;
	eng_model_free(&m);
	return rc;
}
