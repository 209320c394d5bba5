// The parts of libxml2 the bundle reader uses: the streaming reader, the XSD validator and the
// process-wide settings (parser initialization, external entity loader) it configures once.
#include <libxml/xmlversion.h>
// Debian builds libxml2 with ICU, whose headers clash with the ICU copy inside Foundation. Nothing here
// uses libxml2's ICU converters (only pointers to encoding handlers), so the ICU parts are left out.
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/xmlreader.h>
#include <libxml/xmlschemas.h>
#include <libxml/xmlerror.h>
#include <libxml/xmlIO.h>
#include <libxml/globals.h>
