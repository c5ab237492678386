/* eng_devices.c - the backends of this process as JSON (see eng_devices.h). */
#include "eng_devices.h"

#include "eng_cuda.h"

int eng_devices_json(json_t *obj)
{
	eng_cuda_info ci;
	eng_cuda_probe(&ci);
	json_t *backends = json_pack("[s]", "cpu"), *gpus = json_array();
	int rc = backends && gpus ? 0 : -1;
	if (rc == 0 && ci.ngpus > 0)
		rc = json_array_append_new(backends, json_string("cuda"));
	for (int i = 0; rc == 0 && i < ci.ngpus; i++)
		rc = json_array_append_new(gpus, json_pack("{s:s,s:I}", "name", ci.gpu[i].name,
			"memory_bytes", (json_int_t)ci.gpu[i].memory_bytes));
	if (rc == 0)
		rc = json_object_set(obj, "backends", backends);
	if (rc == 0)
		rc = json_object_set(obj, "gpus", gpus);
	json_decref(backends);
	json_decref(gpus);
	return rc == 0 ? 0 : -1;
}
