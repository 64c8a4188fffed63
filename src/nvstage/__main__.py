from nvstage.cli.main import main

main()
