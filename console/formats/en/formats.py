"""Date and time formats for English (FORMAT_MODULE_PATH): ISO dates and 24-hour times
("2026-11-30 17:09 UTC", naming the zone), as the console's own pages show them, instead of Django's
"Nov. 30, 2026, 5:09 p.m.", in Django admin and wherever a value is shown without an
explicit format."""

DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "Y-m-d H:i T"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
