/* acl_prof.h -- the profiling subset om2gen uses (CANN's acl/acl_prof.h declares the same). */
#ifndef ACL_ACL_PROF_H_
#define ACL_ACL_PROF_H_

#include <stddef.h>

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A mark: msg (at most 127 characters) and a timestamp, tied to stream (nullptr: the default
 * stream). The CPU runtime stamps it on the host when called; om2rtTakeProfMarks reads the
 * marks back (om2/om2_cpu_runtime.h). */
ACL_FUNC_VISIBILITY aclError aclprofMarkEx(const char *msg, size_t msgLen, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  /* ACL_ACL_PROF_H_ */
