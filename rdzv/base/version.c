/* rdzv/base/version.c — the library's version at run time (include/podrun/version.h). */
#include "podrun/version.h"

unsigned podrun_version(void)
{
    return PODRUN_VERSION_NUMBER;
}

const char *podrun_version_string(void)
{
    return PODRUN_VERSION_STRING;
}
