"""cais-container: the co-simulator in a Docker image, driven through the Docker SDK for Python.

    settings.py    every option of the command, declared once
    engine.py      reaching the Docker engine; ContainerError
    context.py     the build context (the repository, .dockerignore applied, extra CA certificates)
    base_image.py  the base image: present, pulled, or built from Debian's packages (debootstrap)
    build.py       building the image, streaming its log
    run.py         the test suite and reproduction runs inside the image
    cli.py         the command line
"""
