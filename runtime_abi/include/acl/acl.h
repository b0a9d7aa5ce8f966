/* acl.h -- umbrella header, as in CANN: includes the runtime API subset om2gen uses. */
#ifndef ACL_ACL_H_
#define ACL_ACL_H_

#include "acl/acl_base.h"
#include "acl/acl_prof.h"
#include "acl/acl_rt.h"

#endif  /* ACL_ACL_H_ */
