/* plugin_not_peat.c: a shared library without the PEAT entry points. */
int some_other_function(void)
{
    return 42;
}
