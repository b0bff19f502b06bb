/* links_alone.c: an empty program; linked with one module's every object and that module's
 * declared dependencies only, it fails to link when the module calls a module above it. */
int main(void)
{
    return 0;
}
